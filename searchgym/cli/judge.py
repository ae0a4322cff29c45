"""`searchgym judge ...`: calibrate a judge against labelled rounds; write the synthetic labelled set.

    searchgym judge calibrate                                    # GoldJudge on the shipped synthetic set
    searchgym judge calibrate --judge llm --backend openai --base-url http://127.0.0.1:30000/v1 --model Qwen3-8B
    searchgym judge calibrate --judge llm --backend transformers --model smollm2-135m --limit 20
    searchgym judge calibrate --labels my_human_labels.jsonl --json report.json
    searchgym judge synthetic --out rounds.jsonl --questions 60

The labelled-round JSONL format is documented in `searchgym.judges.calibration` and docs/step-info.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from pathlib import Path

from searchgym.backends.openai import OpenAIConfig
from searchgym.backends.transformers import TransformersConfig
from searchgym.judges.gold import GoldJudgeConfig
from searchgym.judges.llm import LLMJudgeConfig

logger = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("judge", help="calibrate judges against labelled rounds")
    sub = p.add_subparsers(dest="judge_command", required=True)

    c = sub.add_parser("calibrate", help="agreement and Cohen's kappa per signal between a judge and labelled rounds")
    c.add_argument("--labels", default=None, help="labelled-round JSONL file (default: the shipped synthetic set)")
    c.add_argument("--judge", choices=["gold", "llm"], default="gold", help="which judge to calibrate")
    c.add_argument("--limit", type=int, default=None, help="use only the first N rounds")
    c.add_argument("--json", dest="json_out", default=None, help="also write the full report (with disagreements) here")
    c.add_argument("--show", type=int, default=5, help="print up to N disagreements")
    g = c.add_argument_group("gold judge")
    g.add_argument("--relevance", default=GoldJudgeConfig.relevance, choices=["auto", "doc_ids", "titles", "answers"],
                   help="evidence basis for relevance (see searchgym.judges.gold)")
    j = c.add_argument_group("LLM judge")
    d = LLMJudgeConfig()
    j.add_argument("--backend", choices=["openai", "transformers"], default="openai", help="how to reach the judge model")
    j.add_argument("--model", default=None, help="served model name (openai) or model name/folder (transformers; default smollm2-135m)")
    j.add_argument("--base-url", default="http://127.0.0.1:30000/v1", help="OpenAI-compatible API root (openai backend)")
    j.add_argument("--api-key", default=None, help="bearer token for the server, if it needs one")
    j.add_argument("--timeout", type=float, default=d.timeout_s, help="longest wait for one batch, in seconds")
    j.add_argument("--batch-size", type=int, default=d.batch_size, help="conversations per backend call")
    j.add_argument("--max-tokens", type=int, default=d.max_tokens, help="reply budget per round")
    j.add_argument("--attempts", type=int, default=d.attempts, help="tries per round for malformed replies")
    j.add_argument("--max-doc-chars", type=int, default=d.max_doc_chars, help="each document's text is cut to this length in the prompt")
    j.add_argument("--device", default="cpu", help="torch device (transformers backend)")
    j.add_argument("--model-cache", default=None, help="where converted models are kept (transformers backend)")
    c.set_defaults(func=_calibrate)

    s = sub.add_parser("synthetic", help="write the synthetic labelled rounds (labels known by construction) as JSONL")
    s.add_argument("--out", required=True, help="file to write")
    s.add_argument("--questions", type=int, default=36, help="questions of the synthetic world to build trajectories for")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--entities", type=int, default=400, help="size of the synthetic world")
    s.set_defaults(func=_synthetic)


def _judge(args: argparse.Namespace):
    from searchgym.judges import GoldJudge, LLMJudge

    if args.judge == "gold":
        return GoldJudge(GoldJudgeConfig(relevance=args.relevance)), None
    config = LLMJudgeConfig(timeout_s=args.timeout, batch_size=args.batch_size, max_tokens=args.max_tokens, attempts=args.attempts,
                            max_doc_chars=args.max_doc_chars)
    if args.backend == "openai":
        from searchgym.backends.openai import OpenAIChatBackend

        if not args.model:
            raise SystemExit("--model is required with --backend openai (the served model's name)")
        backend = OpenAIChatBackend(OpenAIConfig(base_url=args.base_url, model=args.model, api_key=args.api_key))
    else:
        from searchgym.backends.transformers import TransformersChatBackend

        backend = TransformersChatBackend(TransformersConfig(model=args.model or "smollm2-135m", device=args.device,
                                                             cache_dir=args.model_cache, batch_size=args.batch_size))
    return LLMJudge(backend, config), backend


def _rounds(args: argparse.Namespace):
    from searchgym.judges.calibration import load_labelled_rounds
    from searchgym.judges.synthetic_labels import DEFAULT_PATH, build_synthetic_calibration

    if args.labels is not None:
        rounds = load_labelled_rounds(args.labels)
    elif DEFAULT_PATH.is_file():
        rounds = load_labelled_rounds(DEFAULT_PATH)
    else:
        logger.info("the shipped synthetic set is not installed; building it (a few seconds)")
        rounds = build_synthetic_calibration()
    return rounds[: args.limit] if args.limit else rounds


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def _calibrate(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from searchgym.judges.calibration import calibrate

    rounds = _rounds(args)
    judge, backend = _judge(args)
    try:
        with tqdm(total=len(rounds), desc=f"judge {judge.name}", unit="round", disable=args.judge == "gold") as bar:
            report = calibrate(judge, rounds, batch_size=args.batch_size if args.judge == "llm" else 256, progress=bar.update)
    finally:
        if hasattr(backend, "close"):
            backend.close()
    print(f"judge: {json.dumps(report.judge, default=str)}")
    print(f"labelled rounds: {report.n}   judge failures (counted as labels 0): {report.failures}")
    print(f"{'signal':<24}{'n':>5}{'agreement':>11}{'kappa':>8}   tp  fp  fn  tn")
    for s in report.signals.values():
        print(f"{s.signal:<24}{s.n:>5}{_fmt(s.agreement):>11}{_fmt(s.kappa):>8}  {s.true_positive:>3} {s.false_positive:>3} "
              f"{s.false_negative:>3} {s.true_negative:>3}")
    if any(k != "unlabelled" for k in report.by_kind):
        print("agreement by kind (u, v):")
        for kind, row in report.by_kind.items():
            print(f"  {kind:<22} n={row['n']:<4} u={row['retrieval_utility']:.2f}  v={row['reasoning_correctness']:.2f}")
    for d in report.disagreements[: args.show]:
        print(f"disagreement {d['id']} ({d['kind']}): label u,v={d['label']} judged={d['judged']} failed={d['failed']}: "
              f"{(d['analysis'] or '')[:160]}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report.as_dict(), indent=2, default=str), encoding="utf-8")
        print(f"report written to {args.json_out}")
    return 0


def _synthetic(args: argparse.Namespace) -> int:
    from searchgym.judges.calibration import write_labelled_rounds
    from searchgym.judges.synthetic_labels import build_synthetic_calibration

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = write_labelled_rounds(out, build_synthetic_calibration(num_questions=args.questions, seed=args.seed, num_entities=args.entities))
    print(f"wrote {n} labelled rounds to {out}")
    return 0
