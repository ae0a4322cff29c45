"""Write verl parquet from any searchgym id: one row per question, what verl's `RLHFDataset` reads.

    python -m searchgym.integrations.verl.prepare --id SearchQA-Synthetic-v0 --out data/searchgym \\
        --split train test --env-arg num_entities=2000

Each `--split NAME` makes the env with `split=NAME` (the synthetic world's `train`/`test`, a benchmark's
`dev`/`test`, ...) and writes `OUT/NAME.parquet`; without `--split` the env's default questions go to
`OUT/data.parquet`. `--env-arg key=value` (repeatable) passes a `gym.make` keyword; the value is read as
JSON when it parses (`num_entities=2000`, `hops=[1,2]`, `cache_dir=false`), else as a string
(`data_path=/data/hotpot.jsonl`). Columns, as verl's own data examples write them:

- `data_source`: `searchgym/<id>`;
- `prompt`: the env's reset prompt as one user message (byte for byte what `env.reset` returns);
- `ability`: `search-qa`;
- `agent_name`: `searchgym_agent`, so verl's agent-loop rollout plays each row with `SearchGymAgentLoop`;
- `reward_model`: `{"style": "env", "ground_truth": [gold answers]}`: verl shows the ground truth in its
  validation logs; the reward itself comes from the env, which scores against its own record;
- `extra_info`: `index` (the row), `question_id`, `split`, `searchgym_id` and `env_kwargs` (the
  `gym.make` keywords as JSON), which is how the agent loop makes the same env and asks the same question.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import pyarrow as pa
import pyarrow.parquet as pq

import searchgym
from searchgym.cli.keyvalues import key_values
from searchgym.errors import ConfigError

logger = logging.getLogger(__name__)

AGENT_NAME = "searchgym_agent"
"""The name the agent loop is registered under (the rows' `agent_name`)."""


def rows(env_id: str, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One verl row per question of `gym.make(env_id, **env_kwargs)`."""
    if env_id not in searchgym.ENV_IDS:
        raise ConfigError(f"unknown searchgym id {env_id!r}; choose one of {list(searchgym.ENV_IDS)}")
    kwargs_json = json.dumps(dict(env_kwargs), sort_keys=True)
    env = gym.make(env_id, **env_kwargs).unwrapped
    out = []
    for index, record in enumerate(env.records):
        out.append({
            "data_source": f"searchgym/{env_id}",
            "prompt": [{"role": "user", "content": env.protocol.render_prompt(record.question)}],
            "ability": "search-qa",
            "agent_name": AGENT_NAME,
            "reward_model": {"style": "env", "ground_truth": list(record.answers)},
            "extra_info": {"index": index, "question_id": record.id, "split": str(env_kwargs.get("split", "")),
                           "searchgym_id": env_id, "env_kwargs": kwargs_json},
        })
    env.close()
    return out


def write(env_id: str, out: str | Path, splits: Sequence[str] = (), env_kwargs: Mapping[str, Any] | None = None) -> list[Path]:
    """Write `out/<split>.parquet` per split (or `out/data.parquet`); returns the files written."""
    if "split" in (env_kwargs or {}) and splits:
        raise ConfigError("give the split with --split, not as an --env-arg as well")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for split in splits or [None]:
        kwargs = dict(env_kwargs or {}) if split is None else {**(env_kwargs or {}), "split": split}
        table = pa.Table.from_pylist(rows(env_id, kwargs))
        path = folder / f"{split or 'data'}.parquet"
        pq.write_table(table, path)
        logger.info("wrote %d rows to %s", table.num_rows, path)
        written.append(path)
    return written


def parse_env_args(pairs: Sequence[str]) -> dict[str, Any]:
    """`key=value` pairs as keyword arguments (values read as JSON when they parse, else as strings)."""
    return key_values(pairs, "--env-arg")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchgym.integrations.verl.prepare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--id", required=True, help=f"a searchgym id: {', '.join(searchgym.ENV_IDS)}")
    parser.add_argument("--out", required=True, help="the folder the parquet files go to")
    parser.add_argument("--split", nargs="*", default=[], help="splits to write, one file each (the env's split= keyword)")
    parser.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE", help="a gym.make keyword (repeatable)")
    args = parser.parse_args(argv)
    try:
        for path in write(args.id, args.out, args.split, parse_env_args(args.env_arg)):
            print(path)
    except ConfigError as e:
        parser.error(str(e))
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
