"""Rollout traces a person can read: one JSON object per episode in a JSONL file.

Each record holds the question, the gold answers, every turn's text (agent and env), the turn's action,
query, shown titles and judge labels, the reward and how the episode ended. `include_tokens=True` adds
the full trajectory (token ids, loss mask, logprobs, segments) so that `Trajectory.from_dict` can rebuild
it. `python -m agents rollouts show FILE` prints a trace.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from agents.rollout.chat import TextEpisode
from agents.rollout.trajectory import Trajectory
from searchgym.errors import DataError

logger = logging.getLogger(__name__)

TRACE_VERSION = 1


def trace_record(episode: Trajectory | TextEpisode, *, step: int | None = None, include_tokens: bool = False) -> dict[str, Any]:
    if isinstance(episode, Trajectory):
        agent = episode.agent_texts
        observations = [s.text for s in episode.segments if s.kind == "observation"]
    else:
        agent, observations = episode.agent_texts, episode.observation_texts
    turns = []
    for k, text in enumerate(agent):
        info = episode.step_infos[k] if k < len(episode.step_infos) else {}
        turns.append(
            {
                "turn": k,
                "agent": text,
                "action": info.get("action"),
                "query": info.get("query"),
                "answer": info.get("answer"),
                "invalid_reason": info.get("invalid_reason"),
                "shown": [d.get("title") for d in info.get("shown") or []],
                "labels": info.get("labels"),
                "observation": observations[k] if k < len(observations) else None,
            }
        )
    summary = episode.step_infos[-1].get("episode", {}) if episode.step_infos else {}
    record: dict[str, Any] = {
        "trace_version": TRACE_VERSION,
        "step": step,
        "question_id": episode.question_id,
        "question": episode.question,
        "gold_answers": episode.gold_answers,
        "group": episode.group,
        "sample": episode.sample,
        "reward": episode.reward,
        "finish_reason": episode.finish_reason,
        "em": summary.get("em"),
        "f1": summary.get("f1"),
        "weight_version": episode.weight_version,
        "turns": turns,
    }
    if isinstance(episode, Trajectory):
        record["tokens"] = {"total": len(episode.token_ids), "prompt": episode.prompt_length, "sampled": episode.num_sampled_tokens}
        if include_tokens:
            record["trajectory"] = episode.to_dict()
    return record


class TraceWriter:
    """Appends trace records to a JSONL file (flushed after every batch, so a crash loses nothing written)."""

    def __init__(self, path: str | Path, *, include_tokens: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.include_tokens = include_tokens
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (open for the writer's life)

    def write(self, episodes: Iterable[Trajectory | TextEpisode], *, step: int | None = None) -> int:
        if self._file is None:
            raise ValueError("the trace writer is closed")
        count = 0
        for e in episodes:
            self._file.write(json.dumps(trace_record(e, step=step, include_tokens=self.include_tokens), ensure_ascii=False, default=str) + "\n")
            count += 1
        self._file.flush()
        return count

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trace(path: str | Path) -> Iterator[dict[str, Any]]:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"not a JSON line: {e}", path=path, record=number) from e
    except FileNotFoundError:
        raise DataError("no such trace file", path=path) from None


def format_record(record: dict[str, Any], *, max_chars: int | None = 400) -> str:
    """A trace record as plain text; long turns are cut to `max_chars` (None: never)."""

    def cut(text: str | None) -> str:
        text = text or ""
        return text if max_chars is None or len(text) <= max_chars else text[:max_chars] + f" ...[{len(text) - max_chars} more chars]"

    head = f"=== {record.get('question_id')} (group {record.get('group')}, sample {record.get('sample')}): {record.get('finish_reason')}, reward {record.get('reward')}"
    if record.get("step") is not None:
        head += f", step {record['step']}"
    lines = [head + " ===", f"Q: {record.get('question')}", f"gold: {record.get('gold_answers')}"]
    for t in record.get("turns", []):
        action = t.get("action")
        what = {"search": f"search {t.get('query')!r}", "answer": f"answer {t.get('answer')!r}"}.get(action or "", f"invalid ({t.get('invalid_reason')})")
        lines.append(f"[turn {t['turn']}] agent -> {what}")
        lines.append("  " + cut(t.get("agent")).replace("\n", "\n  "))
        if t.get("labels"):
            lines.append(f"  labels: {t['labels']}")
        if t.get("observation"):
            lines.append(f"[turn {t['turn']}] env (shown: {t.get('shown')})")
            lines.append("  " + cut(t["observation"].strip()).replace("\n", "\n  "))
    return "\n".join(lines)


def summarize(records: Iterable[dict[str, Any]]) -> str:
    records = list(records)
    if not records:
        return "0 episodes"
    ends = Counter(r.get("finish_reason") for r in records)
    mean = sum(float(r.get("reward") or 0.0) for r in records) / len(records)
    turns = sum(len(r.get("turns", [])) for r in records) / len(records)
    return f"{len(records)} episodes, mean reward {mean:.3f}, mean turns {turns:.2f}, ends {dict(ends)}"
