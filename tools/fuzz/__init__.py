"""Bad-input fuzzing: what every input surface does with input it was never meant to get.

Five surfaces, each driven by a hypothesis strategy (the tests in `tests/reliability/test_fuzz.py` run the
same strategies with few examples):

- `env`: `SearchQAEnv.step` with arbitrary agent text, in both grammars (tags, tool calls): random
  unicode, soups of grammar tags and JSON fragments, huge integers, deep nesting, lone surrogates, NULs,
  200k-character turns, and values that are not text at all.
- `qa_files`: `load_dataset_file` on files of every format (hotpotqa, hotpotqa_hf, 2wiki, musique,
  flashrag, searchr1, nq_open) in every container (jsonl, JSON list, parquet, each optionally gzipped),
  mutated: fields dropped or given wrong-typed values, huge records, duplicate ids, truncation,
  re-encoding (latin-1, cp1252, UTF-16, UTF-32), invalid UTF-8 bytes, binary garbage.
- `corpus_files`: `load_corpus` on corpus files (jsonl with `contents`, jsonl with `title`/`text`, DPR tsv),
  mutated the same ways.
- `answers`: `SearchQAEnv.step` over an `HTTPRetriever` whose server answers anything
  (`tools/fuzz_answers.py`): only the env's `RetrievalError` may come out of the step.
- `verdicts`: `parse_reply` on adversarial judge replies (`tools/fuzz_verdicts.py`): a wrongly
  accepted verdict or a refused valid one is a crash.
- `server`: `POST /retrieve` on the Search-R1-compatible server (the ASGI app through httpx): arbitrary
  JSON, wrong types, huge and negative `topk`, query lists over the cap, queries over the length cap,
  non-JSON and non-UTF-8 bodies, oversized bodies.

Each input ends in one outcome: normal (an observation, a dataset, a corpus, HTTP 200), a typed error
(`SearchGymError` subclasses by class name, HTTP 4xx by status) or a crash: any other exception, an HTTP
status outside 200/4xx, no answer within the time limit, or a broken contract (a data error that does not
name its file and record, a 4xx without a message, an observation that is not text, terminated and
truncated both true). Crashes must be 0.

    python -m tools.fuzz [--examples 2000] [--surface env --surface server ...] [--seed 0]

The surfaces live in `env`, `files` and `server` (and `tools.fuzz_verdicts`), the shared strategies in
`strategies`, the outcomes and the time limit in `outcomes`, the loop and the report in `driver`.
"""

from tools.fuzz.driver import FUZZ_SETTINGS, SURFACES, Surface, Tally, crash_kind, main, report, run_surface
from tools.fuzz.env import FUZZ_DOCS, FUZZ_RECORDS, EnvHarness, agent_actions, env_cases
from tools.fuzz.files import FileCase, FileHarness, corpus_file_cases, corpus_harness, qa_file_cases, qa_harness
from tools.fuzz.outcomes import TIME_LIMIT_S, InputHang, Outcome, time_limit
from tools.fuzz.server import HTTPCase, ServerHarness, fuzz_server_config, http_outcome, server_cases
from tools.fuzz.strategies import RAW_TOKENS, Raw, dumps, json_leaves, json_values

__all__ = [
    "FUZZ_DOCS", "FUZZ_RECORDS", "FUZZ_SETTINGS", "RAW_TOKENS", "SURFACES", "TIME_LIMIT_S", "EnvHarness", "FileCase",
    "FileHarness", "HTTPCase", "InputHang", "Outcome", "Raw", "ServerHarness", "Surface", "Tally", "agent_actions",
    "corpus_file_cases", "corpus_harness", "crash_kind", "dumps", "env_cases", "fuzz_server_config", "http_outcome",
    "json_leaves", "json_values", "main", "qa_file_cases", "qa_harness", "report", "run_surface", "server_cases",
    "time_limit",
]
