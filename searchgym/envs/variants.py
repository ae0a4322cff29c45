"""The registered environments: public benchmarks, the synthetic world, and a custom corpus."""

from __future__ import annotations

import functools
import inspect
import logging
from pathlib import Path
from typing import Any, Literal

from searchgym.corpus import Corpus, load_corpus
from searchgym.data import fetch_dataset, load_dataset_file
from searchgym.data.checks import check_dataset
from searchgym.data.dataset import OnError, QADataset
from searchgym.data.formats import DatasetFormat
from searchgym.data.hub import cache_path
from searchgym.data.records import QARecord
from searchgym.envs.search_qa import SearchQAEnv
from searchgym.errors import ConfigError, DataNotFoundError

logger = logging.getLogger(__name__)

DEFAULT_SPLITS = {
    "hotpotqa": "dev",
    "2wiki": "dev",
    "musique": "dev",
    "nq": "test",
    "triviaqa": "test",
    "popqa": "test",
    "bamboogle": "test",
}
"""The split each benchmark is evaluated on when `split` is not given (FlashRAG's naming)."""

HAS_CONTEXTS = frozenset({"hotpotqa", "2wiki", "musique"})
"""Datasets whose files carry their own paragraphs, which become the corpus when none is given."""


def _check_env_options(owner: str, options: dict[str, Any]) -> None:
    """Reject misspelled options before any data is loaded, so the error names the typo, not a symptom."""
    accepted = set(inspect.signature(SearchQAEnv.__init__).parameters) - {"self", "records", "corpus"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise TypeError(f"{owner}() got unexpected keyword argument(s) {unknown}; the environment options are {sorted(accepted)}")


def _load_corpus_arg(corpus_path: str | Path | None, on_error: OnError = "raise") -> Corpus | None:
    return None if corpus_path is None else load_corpus(corpus_path, on_error=on_error)


def _corpus_of(
    loaded: QADataset, corpus_path: str | Path | None, env_options: dict[str, Any], on_error: OnError
) -> Corpus | None:
    """`corpus_path`'s corpus, else the questions' own: their context paragraphs, or the corpus file that
    comes with them (a BEIR folder's), loaded only when the retriever is built here (not an object)."""
    corpus = _load_corpus_arg(corpus_path, on_error)
    if corpus is None:
        corpus = loaded.corpus
    if corpus is None and loaded.corpus_path is not None and isinstance(env_options.get("retriever", "bm25"), str):
        corpus = load_corpus(loaded.corpus_path, on_error=on_error)
    return corpus


def _split_arg(data_path: str | Path, split: str | None) -> str | None:
    """The split to pass the loader: a BEIR folder's qrels split; a single file has none."""
    return split if Path(data_path).is_dir() else None


def _limit(records: list[QARecord], limit: int | None) -> list[QARecord]:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit must be an integer >= 1 or None, got {str(limit)[:40]!r}")
    return records if limit is None else records[:limit]


class BenchmarkSearchQAEnv(SearchQAEnv):
    """`SearchQAEnv` over a public benchmark (HotpotQA, NQ, TriviaQA, PopQA, 2Wiki, MuSiQue, Bamboogle).

    The questions come from `data_path` (any format `searchgym.data.load_records` reads) or, for users who
    are online, from the Hugging Face hub into `cache_dir` (`download=True`). The corpus is `corpus_path`
    (wiki-18 in jsonl or DPR tsv), or the file's own context paragraphs for HotpotQA, 2Wiki and MuSiQue
    (the distractor setting). A retriever object (for instance a client of a Search-R1 retrieval server)
    replaces the corpus altogether. See `SearchQAEnv` for the episode, spaces and rewards.

    The file must hold this benchmark's questions (`searchgym.data.checks`): another benchmark's file is a
    `ConfigError` that says what it was detected as. `format=` names the file's format (see
    `searchgym.data.load_dataset_file`) and skips that check. `on_error="skip"` leaves out the records
    of the question file and of the corpus file that cannot be read, with one warning per file that counts
    them. `data_path` may be a BEIR folder (of this benchmark, e.g. BEIR's `nq`); `split` then picks its
    qrels file.
    """

    def __init__(
        self,
        dataset: str,
        *,
        data_path: str | Path | None = None,
        corpus_path: str | Path | None = None,
        split: str | None = None,
        limit: int | None = None,
        download: bool = True,
        cache_dir: str | Path | None | Literal[False] = None,
        format: DatasetFormat = "auto",
        on_error: OnError = "raise",
        **env_options: Any,
    ):
        if dataset not in DEFAULT_SPLITS:
            raise ConfigError(f"unknown dataset {dataset!r}; choose one of {sorted(DEFAULT_SPLITS)}")
        _check_env_options(type(self).__name__, env_options)
        self.dataset = dataset
        if data_path is None:
            split = split or DEFAULT_SPLITS[dataset]
            if not download:
                raise DataNotFoundError(_how_to_provide(dataset, split))
            data_path = fetch_dataset(dataset, split, cache_dir=_hub_cache(cache_dir))
        loaded = load_dataset_file(data_path, source=dataset, format=format, on_error=on_error,
                                   split=_split_arg(data_path, split))
        if format == "auto":
            check_dataset(loaded, dataset, _env_id(dataset))
        self.data_path, self.data_sha256 = loaded.path, loaded.sha256
        corpus = _corpus_of(loaded, corpus_path, env_options, on_error)
        if corpus is None and isinstance(env_options.get("retriever", "bm25"), str):
            raise DataNotFoundError(
                f"{dataset} questions carry no passages to search: pass corpus_path= (the 2018 Wikipedia passages "
                "as jsonl with id+contents or DPR tsv), or retriever= an object such as an HTTP retriever pointed at a "
                "Search-R1 retrieval server",
                path=data_path,
            )
        super().__init__(_limit(list(loaded.records), limit), corpus, cache_dir=cache_dir, **env_options)


class SyntheticSearchQAEnv(SearchQAEnv):
    """`SearchQAEnv` over the offline synthetic world (`searchgym.data.synthetic`).

    A deterministic fictional world of people, places, organisations and works, rendered as
    encyclopedia passages, with 1- to 4-hop questions that no model can answer from memory. Works with no
    data files and no network. Train and test splits start from disjoint entities.
    """

    def __init__(
        self,
        *,
        num_entities: int = 2000,
        hops: int | tuple[int, ...] = (1, 2, 3),
        split: Literal["train", "test"] = "train",
        num_questions: int = 1000,
        seed: int = 0,
        cache_dir: str | Path | None | Literal[False] = None,
        **env_options: Any,
    ):
        from searchgym.data.synthetic import QuestionConfig

        _check_env_options(type(self).__name__, env_options)
        if isinstance(hops, list):
            hops = tuple(hops)
        self.world = _shared_world(num_entities, seed)
        """The generated world: entities, relations and `oracle_trajectory(record)`."""
        records = self.world.questions(QuestionConfig(hops=hops, num_questions=num_questions, split=split, seed=seed))
        super().__init__(records, self.world.corpus, cache_dir=cache_dir, **env_options)


class CustomSearchQAEnv(SearchQAEnv):
    """`SearchQAEnv` over your own questions and corpus.

    `data_path` is a question file in any format `searchgym.data.load_records` reads (FlashRAG jsonl with
    `id`, `question`, `golden_answers` is the simplest), or a BEIR folder (`split` picks its qrels file).
    `corpus_path` is a corpus file (jsonl with `id`+`contents` or `id`+`title`+`text`, a JSON list of
    `{title, text}`, the KILT knowledge source, or DPR tsv); it may be omitted when the question file
    carries its own paragraphs, when a BEIR folder brings its `corpus.jsonl`, or when `retriever` is an
    object. Any benchmark's file loads here, unchecked; `format=` names its format when detection cannot
    tell. `on_error="skip"` leaves out the records of the question file and of the corpus file that cannot
    be read, with one warning per file that counts them.
    """

    def __init__(
        self,
        *,
        data_path: str | Path | None = None,
        corpus_path: str | Path | None = None,
        split: str | None = None,
        limit: int | None = None,
        cache_dir: str | Path | None | Literal[False] = None,
        format: DatasetFormat = "auto",
        on_error: OnError = "raise",
        **env_options: Any,
    ):
        _check_env_options(type(self).__name__, env_options)
        if data_path is None:
            raise DataNotFoundError(
                "SearchQA-Custom-v0 needs data_path= a question file (FlashRAG jsonl: one JSON object per line with "
                "'id', 'question', 'golden_answers'; or any format searchgym.data.load_records reads) and corpus_path= "
                "a corpus file (jsonl with 'id' and 'contents' or 'title'+'text', or DPR tsv)"
            )
        self.split = split
        loaded = load_dataset_file(data_path, source="custom", format=format, on_error=on_error,
                                   split=_split_arg(data_path, split))
        self.data_path, self.data_sha256 = loaded.path, loaded.sha256
        corpus = _corpus_of(loaded, corpus_path, env_options, on_error)
        if corpus is None and isinstance(env_options.get("retriever", "bm25"), str):
            raise DataNotFoundError("no corpus: pass corpus_path= a corpus file, or retriever= a retriever object", path=data_path)
        super().__init__(_limit(list(loaded.records), limit), corpus, cache_dir=cache_dir, **env_options)


@functools.lru_cache(maxsize=4)
def _shared_world(num_entities: int, seed: int):
    """Worlds are immutable and deterministic, so envs of one process share them: a vector env or a
    rollout engine with 32 envs builds the world once, not 32 times."""
    from searchgym.data.synthetic import SyntheticWorld, WorldConfig

    return SyntheticWorld.generate(WorldConfig(num_entities=num_entities, seed=seed))


def _env_id(dataset: str) -> str:
    from searchgym.envs.registration import _BENCHMARKS

    return next((f"SearchQA-{name}-v0" for name, d in _BENCHMARKS.items() if d == dataset), f"SearchQA-{dataset}")


def _hub_cache(cache_dir: str | Path | None | Literal[False]) -> Path:
    from searchgym.retrieval.bm25 import default_cache_dir

    if cache_dir is None or cache_dir is False:
        return default_cache_dir() / "datasets"
    return Path(cache_dir) / "datasets"


def _how_to_provide(dataset: str, split: str) -> str:
    return (
        f"no data for {dataset} ({split} split). Provide it in one of these ways: "
        f"(1) gym.make(..., data_path='path/to/{dataset}.jsonl') with a local file in any supported format; "
        f"(2) put the FlashRAG file at {cache_path(dataset, split, _hub_cache(None))}; "
        "(3) while online, pip install 'searchgym[hub]' and keep download=True to fetch it from the Hugging Face hub"
    )
