"""`python -m agents train --learner cw-grpo --learner.alpha 1.0 --env.hops 1 2 --optim.lr 1e-5 ...`

Every `TrainConfig` field is a flag named by its place in the nesting (`--env.hops`, `--rollout.group-size`,
`--optim.lr`); the learner's own options are `--learner.NAME` flags, one per option of any registered
learner (the help says which learners have it and their defaults); setting one the chosen learner lacks is
an error. The flat flags of the earlier layout (`--hops`, `--lr`, `--kl-coef`, ...) are gone: one is an error
that names its nested flag (`agents.cli.NestedFlagParser`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing

from agents.cli.dataclass_args import add_dataclass_arguments, dataclass_from_args, field_docs, option_kwargs
from agents.learners.registry import get_learner, learner_names
from agents.train.config import TrainConfig
from agents.train.distributed import world_size
from agents.train.presets import PRESETS, get_preset


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help=f"train a registered learner ({', '.join(learner_names())})",
                       description="Train one learner; every option is a TrainConfig field or a field of the learner's config.")
    add_learner_arguments(p)
    p.add_argument("--preset", choices=list(PRESETS), default=None,
                   help="start from a named layout (flags given here win over it): "
                   + "; ".join(f"{n}: {preset.summary}" for n, preset in PRESETS.items()) + " (agents/train/presets.py)")
    add_dataclass_arguments(p, TrainConfig, skip=("learner",))
    p.set_defaults(func=run)


def add_learner_arguments(parser: argparse.ArgumentParser) -> None:
    """`--learner NAME` and `--learner.OPTION` for the options of every registered learner."""
    names = learner_names()
    parser.add_argument("--learner", default="grpo", choices=names,
                        help="; ".join(f"{n}: {get_learner(n).summary}" for n in names) + " (default: grpo)")
    group = parser.add_argument_group("learner options", "Options of the chosen learner's config (--learner.NAME).")
    seen: dict[str, list[str]] = {}
    specs = [get_learner(n) for n in names]
    for spec in specs:
        for f in dataclasses.fields(spec.config):
            seen.setdefault(f.name, []).append(spec.name)
    for name, owners in seen.items():
        first = get_learner(owners[0]).config
        kwargs = option_kwargs(typing.get_type_hints(first)[name])
        if kwargs is None:
            continue
        docs = {o: field_docs(get_learner(o).config).get(name, "") for o in owners}
        defaults = {o: getattr(get_learner(o).config(), name) for o in owners}
        if len(set(docs.values())) == 1:
            text = f"{docs[owners[0]]} [{', '.join(owners)}]"
        else:
            text = " | ".join(f"{o}: {d}" for o, d in docs.items())
        shown = sorted({str(v) for v in defaults.values()})
        text += f" (default: {shown[0]})" if len(shown) == 1 else " (default: " + ", ".join(f"{o} {v}" for o, v in defaults.items()) + ")"
        group.add_argument(f"--learner.{name.replace('_', '-')}", dest=f"learner.{name}", default=None, help=text.replace("%", "%%"), **kwargs)


def learner_from_args(args: argparse.Namespace):
    """The chosen learner's config from `--learner` and the `--learner.OPTION` flags given."""
    spec = get_learner(args.learner)
    own = {f.name for f in dataclasses.fields(spec.config)}
    given = {k.split(".", 1)[1]: v for k, v in vars(args).items() if k.startswith("learner.") and v is not None}
    foreign = sorted(set(given) - own)
    if foreign:
        raise SystemExit(f"error: learner {spec.name!r} has no option {', '.join('--learner.' + f.replace('_', '-') for f in foreign)}")
    return spec.config(**given)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The run's `TrainConfig`: the flags given, then the preset's values (`--preset`), then the defaults."""
    if getattr(args, "preset", None):
        get_preset(args.preset).apply(args)
    return dataclass_from_args(TrainConfig, args, learner=learner_from_args(args))


def run(args: argparse.Namespace) -> int:
    from agents.train.trainer import Trainer

    config = config_from_args(args)
    if args.preset:
        get_preset(args.preset).check_processes(world_size())
    trainer = Trainer(config)
    try:
        before = trainer.evaluate() if config.eval_questions and trainer.step == 0 else None
        history = trainer.run(progress=True)
        after = trainer.evaluate() if config.eval_questions else None
        if trainer.accelerator is not None:
            # Every rank done before any tears the process group down (close): a rank that left while another
            # still had gloo work in flight was seen to abort at exit ("terminate called without an active exception").
            trainer.accelerator.wait_for_everyone()
    finally:
        trainer.close()
    result = {"learner": config.learner_name, "steps": trainer.step, "last": history[-1] if history else None,
              "eval_before": before, "eval_after": after, "out_dir": config.out_dir}
    if trainer.is_main:  # one report per run, not one per data-parallel process
        print(json.dumps(result, indent=2))
    return 0
