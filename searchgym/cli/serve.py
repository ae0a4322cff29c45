"""`searchgym serve ...`: a Search-R1-compatible retrieval server (see `searchgym.retrieval.server`).

    searchgym serve --corpus wiki18.jsonl                        # BM25, index cached on first start
    searchgym serve --index DIR                                  # dense, from `searchgym index build`
    searchgym serve --retriever hybrid --corpus wiki18.jsonl --index DIR
    searchgym serve --corpus c.jsonl --retriever dense --port 8001 --topk 3

Clients: Search-R1 / veRL / SkyRL (`search_url=http://127.0.0.1:8000/retrieve`) or
`searchgym.retrieval.HTTPRetriever`. Binds 127.0.0.1; another --host needs --allow-remote, and then an
API key (--api-key-file) that every request must carry.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os

from searchgym.errors import ConfigError

SERVER_FLAGS = ("host", "port", "default_topk", "max_topk", "max_queries", "max_query_chars", "max_results", "max_body_bytes",
                "max_batch_queries", "batch_wait_ms", "retriever_start_timeout_s", "header_timeout_s", "body_timeout_s",
                "keep_alive_timeout_s", "max_connections", "max_request_line_bytes", "max_header_bytes", "max_header_fields")
"""The `ServerConfig` fields that are command-line flags (`default_topk` is `--topk`)."""

logger = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    from searchgym.cli.fields import field_doc
    from searchgym.retrieval.server import ServerConfig

    d = ServerConfig()
    p = subparsers.add_parser("serve", help="run a Search-R1-compatible retrieval server")
    p.add_argument(
        "--retriever",
        choices=["bm25", "dense", "hybrid"],
        default=None,
        help="default: dense when --index is given alone, else bm25",
    )
    p.add_argument("--corpus", help="corpus file (jsonl or DPR tsv); needed for bm25 and hybrid")
    p.add_argument("--index", help="dense index folder from `searchgym index build` (dense, hybrid)")
    p.add_argument(
        "--cache-dir",
        default=None,
        help="where BM25 and in-memory dense indexes are cached (default ~/.cache/searchgym)",
    )
    p.add_argument(
        "--allow-encoder",
        action="append",
        default=[],
        metavar="MODEL",
        help="a model folder or hub id that --index may name as its encoder (repeatable); the packaged "
        "all-MiniLM-L6-v2 is always allowed. An index's manifest is data: it cannot pick a model on its own",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host that is not loopback (the server then answers every machine that can reach it); "
        "give it an API key too",
    )
    p.add_argument(
        "--api-key-file",
        metavar="PATH",
        help="file holding the API key every request must carry (Authorization: Bearer <key> or X-API-Key: <key>); "
        "a file keeps the key out of the process list",
    )
    p.add_argument("--api-key", help="the API key itself (visible to other users in the process list: prefer --api-key-file)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for the query encoder and FAISS (default: all cores); 1 is often fastest for one-query requests on a busy machine",
    )
    p.add_argument(
        "--retriever-process",
        action=argparse.BooleanOptionalAction,
        default=os.name == "posix",  # Unix socket pairs under asyncio: not on Windows
        help="run the retriever in a process of its own, beside the HTTP server's (the default on Linux and "
        "macOS); --no-retriever-process keeps it in a thread of the server's process",
    )
    for name in SERVER_FLAGS:
        flag = "--topk" if name == "default_topk" else f"--{name.replace('_', '-')}"
        default = getattr(d, name)
        p.add_argument(flag, dest=name, type=type(default), default=default, help=field_doc(ServerConfig, name))
    p.set_defaults(func=_serve)


def _check_spec(kind: str | None, corpus_path: str | None, index_dir: str | None) -> str:
    """The retriever kind the flags ask for; ConfigError when they do not add up."""
    kind = kind or ("dense" if index_dir and not corpus_path else "bm25")
    if kind in ("bm25", "hybrid") and not corpus_path:
        raise ConfigError(f"--retriever {kind} needs --corpus")
    if kind == "dense" and not (index_dir or corpus_path):
        raise ConfigError("--retriever dense needs --index (or --corpus to embed it now)")
    return kind


def build_retriever(kind: str | None, corpus_path: str | None, index_dir: str | None, cache_dir: str | None,
                    allow_encoders: tuple[str, ...] = ()):
    """The retriever `searchgym serve` serves."""
    from searchgym.corpus import load_corpus
    from searchgym.retrieval import BM25Retriever, DenseRetriever, HybridRetriever

    kind = _check_spec(kind, corpus_path, index_dir)
    if kind == "dense" and index_dir:
        # The index's own document store serves the passages; the corpus file, if given, is only checked.
        return DenseRetriever.load(index_dir, corpus_path=corpus_path, allow_encoders=allow_encoders)
    corpus = load_corpus(corpus_path)  # type: ignore[arg-type]
    if kind == "bm25":
        return BM25Retriever(corpus, cache_dir=cache_dir)
    dense = DenseRetriever.load(index_dir, corpus=corpus, allow_encoders=allow_encoders) if index_dir else DenseRetriever(corpus, cache_dir=cache_dir)
    if kind == "dense":
        return dense
    return HybridRetriever([BM25Retriever(corpus, cache_dir=cache_dir), dense])  # type: ignore[arg-type]


def _serve(args: argparse.Namespace) -> int:
    from searchgym.retrieval.server import ServerConfig, serve

    config = ServerConfig(**{name: getattr(args, name) for name in SERVER_FLAGS}, retriever_process=args.retriever_process,
                          allow_remote=args.allow_remote, api_key=_api_key(args))
    spec = (args.retriever, args.corpus, args.index, args.cache_dir, args.threads, tuple(args.allow_encoder))
    if config.retriever_process:
        # Built in the retriever process; checked here first, so that a bad flag fails before anything starts.
        kind = _check_spec(args.retriever, args.corpus, args.index)
        if args.threads is not None:
            _check_threads(args.threads)
        for flag, path in (("--corpus", args.corpus), ("--index", args.index)):
            if path is not None and not os.path.exists(path):
                raise ConfigError(f"{flag} {path}: no such file or folder")
        retriever = functools.partial(build_in_process, *spec)
    else:
        retriever = build_in_process(*spec)
        kind = retriever.describe()["kind"]
    if config.allow_remote and config.api_key is None:
        logger.warning("binding %s without an API key: any machine that reaches it is answered; add --api-key-file",
                       config.host)
    print(f"serving {kind} retrieval on http://{config.host}:{config.port}/retrieve", flush=True)
    serve(retriever, config, log_level=args.log_level)
    return 0


def _api_key(args: argparse.Namespace) -> str | None:
    if args.api_key and args.api_key_file:
        raise ConfigError("give --api-key or --api-key-file, not both")
    if args.api_key_file:
        try:
            with open(args.api_key_file, encoding="utf-8") as f:
                return f.read().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"--api-key-file {args.api_key_file}: cannot read it ({e})") from None
    return args.api_key


def build_in_process(kind, corpus_path, index_dir, cache_dir, threads, allow_encoders=()):
    """`build_retriever` with the query-time thread count applied first (the retriever process's factory)."""
    if threads is not None:
        set_threads(threads)
    return build_retriever(kind, corpus_path, index_dir, cache_dir, allow_encoders)


def _check_threads(n: int) -> None:
    from searchgym.threads import check_threads

    check_threads(n, "--threads")


def set_threads(n: int) -> None:
    """Limit torch (query encoding), FAISS (OpenMP search), numba (BM25) and BLAS to `n` threads."""
    _check_threads(n)
    from searchgym.threads import set_threads as apply

    apply(n)
