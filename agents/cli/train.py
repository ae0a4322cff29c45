"""`python -m agents train --learner cw-grpo --env-id SearchQA-Synthetic-v0 --model smollm2-135m ...`"""

from __future__ import annotations

import argparse
import json

from agents.cli.dataclass_args import add_dataclass_arguments, dataclass_from_args
from agents.train.config import TrainConfig


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a reference learner (GRPO, CW-GRPO, E-GRPO, COSEARCH)",
                       description="Train one learner; every option is a TrainConfig field.")
    add_dataclass_arguments(p, TrainConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.train.trainer import Trainer

    config = dataclass_from_args(TrainConfig, args)
    trainer = Trainer(config)
    try:
        before = trainer.evaluate() if config.eval_questions and trainer.step == 0 else None
        history = trainer.run(progress=True)
        after = trainer.evaluate() if config.eval_questions else None
    finally:
        trainer.close()
    result = {"learner": config.learner, "steps": trainer.step, "last": history[-1] if history else None,
              "eval_before": before, "eval_after": after, "out_dir": config.out_dir}
    if trainer.is_main:  # one report per run, not one per data-parallel process
        print(json.dumps(result, indent=2))
    return 0
