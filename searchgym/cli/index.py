"""`searchgym index ...`: build and inspect dense retrieval indexes.

    searchgym index build CORPUS.jsonl --out DIR [--encoder all-MiniLM-L6-v2] [--prefixes e5] [--index hnsw]
    searchgym index rebuild SRC_DIR --out DIR --index ivf --pq-m 64     # new index type, same embeddings
    searchgym index info DIR

The corpus is streamed (jsonl with `contents` or `title`+`text`, or DPR tsv, optionally gzipped), so
memory stays flat whatever its size; a progress bar counts passages embedded.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from searchgym.cli.fields import field_choices, field_doc
from searchgym.retrieval.faiss_index import DenseIndexConfig
from searchgym.retrieval.encoders import EncoderConfig


def add_encoder_arguments(p: argparse.ArgumentParser) -> None:
    d = EncoderConfig()
    p.add_argument("--encoder", default=d.model, help=field_doc(EncoderConfig, "model"))
    p.add_argument("--prefixes", default=d.prefixes, choices=field_choices(EncoderConfig, "prefixes"), help=field_doc(EncoderConfig, "prefixes"))
    p.add_argument(
        "--pooling", default=d.pooling, choices=field_choices(EncoderConfig, "pooling"), help=field_doc(EncoderConfig, "pooling")
    )
    p.add_argument("--max-length", type=int, default=d.max_length, help=field_doc(EncoderConfig, "max_length"))
    p.add_argument("--batch-size", type=int, default=d.batch_size, help=field_doc(EncoderConfig, "batch_size"))
    p.add_argument("--dtype", default=d.dtype, choices=field_choices(EncoderConfig, "dtype"), help=field_doc(EncoderConfig, "dtype"))
    p.add_argument("--device", default=d.device, help=field_doc(EncoderConfig, "device"))


def add_index_arguments(p: argparse.ArgumentParser) -> None:
    d = DenseIndexConfig()
    p.add_argument(
        "--index",
        dest="kind",
        default=d.kind,
        choices=field_choices(DenseIndexConfig, "kind"),
        help=field_doc(DenseIndexConfig, "kind"),
    )
    for f in fields(DenseIndexConfig):
        if f.name != "kind":
            p.add_argument(
                f"--{f.name.replace('_', '-')}",
                type=int,
                default=getattr(d, f.name),
                help=field_doc(DenseIndexConfig, f.name),
            )


def encoder_config(args: argparse.Namespace) -> EncoderConfig:
    return EncoderConfig(
        model=args.encoder,
        prefixes=args.prefixes,
        pooling=args.pooling,
        max_length=args.max_length,
        batch_size=args.batch_size,
        dtype=args.dtype,
        device=args.device,
    )


def index_config(args: argparse.Namespace) -> DenseIndexConfig:
    return DenseIndexConfig(**{f.name: getattr(args, f.name) for f in fields(DenseIndexConfig)})


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("index", help="build and inspect dense retrieval indexes")
    sub = p.add_subparsers(dest="index_command", required=True)

    b = sub.add_parser("build", help="embed a corpus file and write an index folder")
    b.add_argument("corpus", help="corpus file: jsonl (id+contents or id+title+text) or DPR tsv, optionally .gz")
    b.add_argument("--out", required=True, help="index folder to write")
    add_encoder_arguments(b)
    add_index_arguments(b)
    b.add_argument(
        "--no-docs", action="store_true", help="do not store the documents in the folder (then serving needs --corpus)"
    )
    b.add_argument("--limit", type=int, default=None, help="embed only the first N documents (for trials)")
    b.add_argument(
        "--total",
        type=int,
        default=None,
        help="number of documents, for the progress bar's estimate (wiki-18: 21015324)",
    )
    b.add_argument("--overwrite", action="store_true", help="replace an existing folder")
    b.add_argument("--threads", type=int, default=None,
                   help="CPU threads for encoding and FAISS (default: the physical cores this process may use)")
    b.set_defaults(func=_build)

    r = sub.add_parser(
        "rebuild", help="build another index type from an index folder's embeddings, without re-encoding"
    )
    r.add_argument("source", help="existing index folder")
    r.add_argument("--out", required=True, help="new index folder")
    add_index_arguments(r)
    r.add_argument("--overwrite", action="store_true", help="replace an existing folder")
    r.set_defaults(func=_rebuild)

    i = sub.add_parser("info", help="print an index folder's manifest")
    i.add_argument("folder")
    i.add_argument("--verify", action="store_true",
                   help="also hash every file now and compare with the manifest (exit 1 on a mismatch)")
    i.set_defaults(func=_info)


def _build(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from searchgym.retrieval.index import build_index
    from searchgym.threads import set_threads

    set_threads(args.threads)
    total = args.total if args.limit is None else min(args.limit, args.total or args.limit)
    with tqdm(total=total, unit="doc", desc="embedding", dynamic_ncols=True) as bar:

        def progress(n: int) -> None:
            bar.update(n - bar.n)

        manifest = build_index(
            args.corpus,
            args.out,
            encoder=encoder_config(args),
            index=index_config(args),
            store_docs=not args.no_docs,
            limit=args.limit,
            overwrite=args.overwrite,
            progress=progress,
        )
    secs = manifest.build_seconds
    print(
        f"{manifest.num_docs} documents -> {args.out}: {manifest.index_type} index, {manifest.index_bytes / 2**20:.1f} MiB, "
        f"dim {manifest.dim}; encoding {secs.get('encode', 0):.1f} s, indexing {secs.get('index', 0):.1f} s"
    )
    return 0


def _rebuild(args: argparse.Namespace) -> int:
    from searchgym.retrieval.index import rebuild_index

    manifest = rebuild_index(args.source, args.out, index=index_config(args), overwrite=args.overwrite)
    print(
        f"{manifest.num_docs} documents -> {args.out}: {manifest.index_type} index, {manifest.index_bytes / 2**20:.1f} MiB, "
        f"indexing {manifest.build_seconds.get('index', 0):.1f} s"
    )
    return 0


def _info(args: argparse.Namespace) -> int:
    from pathlib import Path

    from searchgym.errors import IndexIntegrityError
    from searchgym.retrieval.index import IndexManifest
    from searchgym.retrieval.integrity import verify_files

    manifest = IndexManifest.read(args.folder)
    print(manifest.to_json())
    if args.verify:
        try:
            verify_files(Path(args.folder), manifest.files, mode="full")
        except IndexIntegrityError as e:
            print(f"verification failed: {e}")
            return 1
        print(f"verified: {len(manifest.files)} files match their recorded size and SHA-256")
    return 0
