"""Whether a loaded question file holds the benchmark an environment id promises.

Each benchmark id accepts the records that name its dataset (by structure, a Search-R1 `data_source`, or
a TriviaQA answer object; see `formats.record_dataset`). The open-domain ids (NQ, TriviaQA, Bamboogle)
also accept plain question-and-answers records, which name no dataset, unless the file's name names
another benchmark. The ids whose data has annotations of its own (HotpotQA, 2Wiki, MuSiQue, PopQA) accept
plain records only from a file whose name names them, since such records lack the annotations (supporting
facts, decompositions, subjects) the id promises.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from searchgym.data.formats import DATASET_NAMES, source_from_path
from searchgym.data.loaders import QADataset
from searchgym.errors import ConfigError

logger = logging.getLogger(__name__)

PLAIN = ""
"""The key of `QADataset.datasets` for records that name no dataset."""

ACCEPTED: Mapping[str, frozenset[str]] = {
    "hotpotqa": frozenset({"hotpotqa"}),
    "2wiki": frozenset({"2wiki"}),
    "musique": frozenset({"musique"}),
    "popqa": frozenset({"popqa"}),
    "nq": frozenset({"nq", PLAIN}),
    "triviaqa": frozenset({"triviaqa", PLAIN}),
    "bamboogle": frozenset({"bamboogle", PLAIN}),
}
"""The datasets' records each benchmark id loads; `PLAIN` is question-and-answers records."""

_ANNOTATIONS = {
    "hotpotqa": "supporting_facts and context",
    "2wiki": "supporting_facts, context and evidences",
    "musique": "question_decomposition",
    "popqa": "subj, prop and obj",
}


def check_dataset(loaded: QADataset, dataset: str, env_id: str) -> None:
    """Raise `ConfigError` when `loaded` holds records of another benchmark than `dataset`.

    The message names the environment id, what the file was detected as, and the two ways to load it
    anyway: `SearchQA-Custom-v0`, or an explicit `format=` (which skips this check).
    """
    accepted = ACCEPTED[dataset]
    counts = dict(loaded.datasets)
    plain = counts.pop(PLAIN, 0)
    foreign = {name: n for name, n in counts.items() if name not in accepted}
    named = source_from_path(Path(loaded.path)) if plain else None
    if foreign:
        found = ", ".join(f"{n} {DATASET_NAMES.get(name, name)}" for name, n in sorted(foreign.items()))
        raise _mismatch(loaded, dataset, env_id, f"holds {found} records")
    if not plain:
        return
    if PLAIN in accepted:
        if named is not None and named not in accepted:
            what = f"is named as {DATASET_NAMES.get(named, named)} data ({Path(loaded.path).name})"
            raise _mismatch(loaded, dataset, env_id, what)
        return
    if named == dataset:
        logger.warning(
            "%s: %d records carry no %s annotations (%s); they get their first answer as the only gold entity",
            loaded.path, plain, DATASET_NAMES[dataset], _ANNOTATIONS[dataset],
        )
        return
    raise _mismatch(
        loaded,
        dataset,
        env_id,
        f"holds {plain} records with a question and answers only, none of {DATASET_NAMES[dataset]}'s "
        f"{_ANNOTATIONS[dataset]} (NQ, TriviaQA or Bamboogle data?)",
    )


def _mismatch(loaded: QADataset, dataset: str, env_id: str, what: str) -> ConfigError:
    return ConfigError(
        f"{env_id} loads {DATASET_NAMES[dataset]} questions, but {loaded.path} (detected format {loaded.format!r}) "
        f"{what}. To load it anyway, use gym.make('SearchQA-Custom-v0', data_path=..., corpus_path=...), or pass "
        f"format={loaded.format!r} to {env_id} to read it as that format without this check."
    )
