"""`python -m agents export CHECKPOINT OUT`: a training checkpoint (sharded or whole weights) as a plain
model folder (`agents.train.export`)."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("export", help="turn a training checkpoint (sharded or whole weights) into a plain save_pretrained model folder")
    parser.add_argument("checkpoint", help="a step-NNNNNN folder of a run's checkpoints/")
    parser.add_argument("out", help="the model folder to write")
    parser.set_defaults(func=_export)


def _export(args: argparse.Namespace) -> int:
    from agents.train.checkpoint import CheckpointError
    from agents.train.export import export_checkpoint

    try:
        folder = export_checkpoint(args.checkpoint, args.out)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(folder)
    return 0
