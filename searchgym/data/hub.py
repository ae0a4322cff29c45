"""Fetch the benchmark question files from the Hugging Face hub into a local cache folder.

The files come from FlashRAG's `RUC-NLPIR/FlashRAG_datasets` dataset repository, laid out as
`{subset}/{split}.jsonl`, and are cached at `cache_dir/{subset}/{split}.jsonl` (the same relative path),
so a file downloaded by hand can be dropped there. `huggingface_hub` is an optional dependency
(`pip install "searchgym[hub]"`), imported only when a download is needed.

Offline users get a `DataNotFoundError` within about two seconds that lists the ways to provide the
file, instead of waiting on network timeouts.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from searchgym.errors import ConfigError, DataNotFoundError

logger = logging.getLogger(__name__)

FLASHRAG_REPO_ID = "RUC-NLPIR/FlashRAG_datasets"
_DEFAULT_ENDPOINT = "https://huggingface.co"
_CONNECT_CHECK_S = 2.0
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


@dataclass(frozen=True)
class HubSource:
    """Where one of our datasets lives on the hub."""

    subset: str
    """The folder in the repository, e.g. `2wikimultihopqa`."""
    splits: tuple[str, ...]
    """The splits the repository has for this dataset."""
    repo_id: str = FLASHRAG_REPO_ID
    revision: str = "main"

    def filename(self, split: str) -> str:
        """The file's path inside the repository (and inside the cache folder)."""
        return f"{self.subset}/{split}.jsonl"

    def url(self, split: str) -> str:
        """A direct download address, for users who fetch the file by hand."""
        return f"{_DEFAULT_ENDPOINT}/datasets/{self.repo_id}/resolve/{self.revision}/{self.filename(split)}"


DATASET_SOURCES: Mapping[str, HubSource] = MappingProxyType(
    {
        "hotpotqa": HubSource("hotpotqa", ("train", "dev")),
        "nq": HubSource("nq", ("train", "dev", "test")),
        "triviaqa": HubSource("triviaqa", ("train", "dev", "test")),
        "popqa": HubSource("popqa", ("test",)),
        "2wiki": HubSource("2wikimultihopqa", ("train", "dev")),
        "musique": HubSource("musique", ("train", "dev")),
        "bamboogle": HubSource("bamboogle", ("test",)),
    }
)
"""Our dataset names -> their FlashRAG hub files (`{subset}/{split}.jsonl`)."""


def cache_path(name: str, split: str, cache_dir: str | Path) -> Path:
    """Where `fetch_dataset` keeps (and looks for) the file of `name`/`split`."""
    return Path(cache_dir) / _source(name, split).filename(split)


def fetch_dataset(name: str, split: str, *, cache_dir: Path, timeout_s: float = 10.0) -> Path:
    """Return the local path of dataset `name`'s `split` file, downloading it on first use.

    A file already at `cache_path(name, split, cache_dir)` is returned without touching the network.
    Otherwise the file is downloaded from the hub with `huggingface_hub`. Raises ConfigError for an
    unknown name or split, and DataNotFoundError (listing the ways to provide the file) when it cannot be
    downloaded: huggingface_hub missing, `HF_HUB_OFFLINE` set, the hub unreachable, or the download
    failing.
    """
    source = _source(name, split)
    target = Path(cache_dir) / source.filename(split)
    if target.is_file() and target.stat().st_size > 0:
        logger.debug("using cached %s", target)
        return target
    if not _hub_installed():
        raise _not_found(name, split, target, "the huggingface_hub package is not installed")
    if _offline_mode():
        raise _not_found(name, split, target, "HF_HUB_OFFLINE is set")
    if not _hub_reachable(min(_CONNECT_CHECK_S, timeout_s)):
        raise _not_found(name, split, target, f"{_endpoint_host()} cannot be reached (offline?)")
    logger.info("downloading %s from %s into %s", source.filename(split), source.repo_id, cache_dir)
    try:
        downloaded = _download(source, split, Path(cache_dir), timeout_s)
    except Exception as exc:  # hub, HTTP and OS errors all mean the same thing to the caller
        raise _not_found(name, split, target, f"download failed: {type(exc).__name__}: {exc}") from exc
    if not downloaded.is_file():
        raise _not_found(name, split, target, f"the download left no file at {downloaded}")
    return downloaded


def _source(name: str, split: str) -> HubSource:
    if name not in DATASET_SOURCES:
        raise ConfigError(f"unknown dataset {name!r}; known: {', '.join(DATASET_SOURCES)}")
    source = DATASET_SOURCES[name]
    if split not in source.splits:
        raise ConfigError(f"dataset {name!r} has no split {split!r} on the hub; it has: {', '.join(source.splits)}")
    return source


def _not_found(name: str, split: str, target: Path, reason: str) -> DataNotFoundError:
    source = DATASET_SOURCES[name]
    message = (
        f"dataset {name!r} split {split!r} is not available: {reason.rstrip('. ')}. Provide it in one of these ways:\n"
        f"  - pass data_path=... pointing at a local copy of the file (any format load_dataset_file reads);\n"
        f"  - put the file at {target} (download it from {source.url(split)});\n"
        f'  - install the hub extra (pip install "searchgym[hub]") and run once while online.'
    )
    return DataNotFoundError(message, path=target)


def _hub_installed() -> bool:
    try:
        importlib.import_module("huggingface_hub")
    except ImportError:
        return False
    return True


def _offline_mode() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _endpoint() -> tuple[str, int]:
    parts = urlsplit(os.environ.get("HF_ENDPOINT") or _DEFAULT_ENDPOINT)
    host = parts.hostname or "huggingface.co"
    port = parts.port or (80 if parts.scheme == "http" else 443)
    return host, port


def _endpoint_host() -> str:
    return _endpoint()[0]


def _hub_reachable(timeout_s: float) -> bool:
    """Whether a TCP connection to the hub endpoint opens within `timeout_s` seconds.

    Name resolution runs in a daemon thread because `getaddrinfo` ignores socket timeouts and can block
    for much longer than the check is allowed to take.
    """
    if any(os.environ.get(v) for v in _PROXY_VARIABLES):
        # Through a proxy a direct connection says nothing; the download's own timeout applies.
        return True
    host, port = _endpoint()
    deadline = time.monotonic() + timeout_s
    addresses = _resolve(host, port, timeout_s)
    for family, kind, proto, _, address in addresses[:3]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(remaining)
                sock.connect(address)
            return True
        except OSError as exc:
            logger.debug("cannot connect to %s:%d (%s)", host, port, exc)
    return False


def _resolve(host: str, port: int, timeout_s: float) -> list[tuple[Any, ...]]:
    result: list[tuple[Any, ...]] = []

    def lookup() -> None:
        try:
            result.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            logger.debug("cannot resolve %s (%s)", host, exc)

    thread = threading.Thread(target=lookup, name="searchgym-hub-resolve", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return list(result) if not thread.is_alive() else []


def _download(source: HubSource, split: str, cache_dir: Path, timeout_s: float) -> Path:
    from huggingface_hub import hf_hub_download

    path = hf_hub_download(
        repo_id=source.repo_id,
        filename=source.filename(split),
        repo_type="dataset",
        revision=source.revision,
        local_dir=cache_dir,
        etag_timeout=timeout_s,
    )
    return Path(path)
