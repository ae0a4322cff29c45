"""`agents rollouts show FILE`: print a rollout trace for a person to read."""

from __future__ import annotations

import argparse
import sys

from searchgym.errors import DataError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("rollouts", help="inspect rollout traces")
    actions = parser.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print the episodes of a JSONL trace")
    show.add_argument("file", help="a trace written by agents.rollout.TraceWriter")
    show.add_argument("--limit", type=int, default=None, help="print at most this many episodes")
    show.add_argument("--question-id", default=None, help="only episodes of this question")
    show.add_argument("--finish", default=None, choices=["answered", "out_of_turns", "over_long", "format_error"], help="only episodes that ended this way")
    show.add_argument("--step", type=int, default=None, help="only episodes written at this training step")
    show.add_argument("--max-chars", type=int, default=400, help="cut each turn's text to this many characters (0: never)")
    show.add_argument("--summary", action="store_true", help="print only the summary line")
    show.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    from agents.rollout.trace import format_record, read_trace, summarize

    if args.limit is not None and args.limit < 0:
        print("--limit must be >= 0", file=sys.stderr)
        return 2
    try:
        records = [
            r
            for r in read_trace(args.file)
            if (args.question_id is None or r.get("question_id") == args.question_id)
            and (args.finish is None or r.get("finish_reason") == args.finish)
            and (args.step is None or r.get("step") == args.step)
        ]
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if not args.summary:
        for r in records[: args.limit]:
            print(format_record(r, max_chars=args.max_chars or None))
            print()
    print(summarize(records))
    return 0
