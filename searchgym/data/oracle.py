"""Oracle trajectories: the agent turns that solve a question from its gold annotations, for cold starts
that imitate them (`agents.train.sft`, COSEARCH's ranker cold start).

- A synthetic world's record: the world's own oracle (`searchgym.data.synthetic.oracle_trajectory`), one
  search "<name> <keyword>" per hop.
- Any other record with gold titles and an answer (HotpotQA, 2Wiki, MuSiQue with their paragraphs): one
  search per gold title, the title itself as the query, those the question names first (the bridge's
  passage of a HotpotQA bridge question is usually the one it does not name), then the first gold answer.
  Over the file's own paragraphs the title's passage is what a lexical query on the title finds first;
  the think text names each title it looks up and nothing it has not been shown.

>>> from searchgym.data.records import QARecord
>>> record = QARecord(id="q", question="Which river flows through the capital of Elbonia?", answers=("Mud",),
...                   gold_titles=("Mudville", "Elbonia"))
>>> [turn.split("<search>")[-1] for turn in oracle_turns(record)]
['Elbonia</search>', 'Mudville</search>', '<think>The passages on Elbonia and Mudville give the answer.</think>\\n<answer>Mud</answer>']
"""

from __future__ import annotations

from collections.abc import Iterable

from searchgym.data.records import QARecord
from searchgym.entities import normalize_entity
from searchgym.errors import ConfigError

__all__ = ["has_oracle", "oracle_turns", "title_trajectory"]


def _is_synthetic(record: QARecord) -> bool:
    return "chain" in record.metadata and "path_names" in record.metadata


def has_oracle(records: Iterable[QARecord]) -> bool:
    """Whether every record has an oracle trajectory (synthetic metadata, or gold titles and an answer)."""
    return all(_is_synthetic(r) or (r.gold_titles and r.answers) for r in records)


def title_trajectory(record: QARecord) -> list[str]:
    """One search per gold title (those the question names first, otherwise in the record's order), then
    the answer; see the module docstring."""
    if not record.gold_titles or not record.answers:
        raise ConfigError(f"record {record.id!r} has no gold titles or no answer: it has no oracle trajectory")
    titles = list(dict.fromkeys(record.gold_titles))
    question = f" {normalize_entity(record.question)} "
    named = [t for t in titles if f" {normalize_entity(t)} " in question]
    titles = named + [t for t in titles if t not in named]
    turns = []
    for i, title in enumerate(titles):
        if i == 0:
            think = f"The question takes {len(titles)} passage{'s' if len(titles) > 1 else ''}. First I look up {title}."
        else:
            think = f"Next I look up {title}."
        turns.append(f"<think>{think}</think>\n<search>{title}</search>")
    read = " and ".join(titles) if len(titles) < 3 else ", ".join(titles[:-1]) + " and " + titles[-1]
    turns.append(f"<think>The passage{'s' if len(titles) > 1 else ''} on {read} give{'' if len(titles) > 1 else 's'} "
                 f"the answer.</think>\n<answer>{record.answers[0]}</answer>")
    return turns


def oracle_turns(record: QARecord) -> list[str]:
    """The oracle trajectory of `record` in Search-R1 tag format: the synthetic world's for its records,
    else `title_trajectory`."""
    if _is_synthetic(record):
        from searchgym.data.synthetic import oracle_trajectory

        return oracle_trajectory(record)
    return title_trajectory(record)
