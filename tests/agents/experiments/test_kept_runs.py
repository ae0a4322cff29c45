"""The learners' runs kept in `docs/runs/<preset>/` (their `results.json`, model paths relative to the folder the
commands ran in) are the per-question record behind the experiment log's tables: they must merge into one
report, be runs of the preset as it is defined now, on the env the code builds now, and say what the log says."""

import json
import statistics
from dataclasses import asdict
from pathlib import Path

import pytest

from agents.experiments import merge, presets
from agents.experiments import report as learner_report
from agents.experiments.eval import env_fingerprint
from agents.experiments.fingerprint import differences, env_factory, format_differences, jsonable

ROOT = Path(__file__).resolve().parents[3]
KEPT = sorted(d for d in (ROOT / "docs" / "runs").iterdir() if d.is_dir())
LOG = (ROOT / "docs" / "experiment-log.md").read_text()
NAMES = {"grpo": "GRPO", "cw-grpo": "CW-GRPO", "e-grpo": "E-GRPO", "cosearch": "COSEARCH", "sft": "SFT"}


def _from_the_checkout(fingerprint: dict) -> dict:
    """A kept fingerprint whose env reads question files (`data_path`, `corpus_path`: kept relative to the
    folder the commands ran in, a checkout's root) with them found from this checkout; the test skips where
    they are absent (the shared benchmark samples sit beside a checkout, not in it)."""
    make = dict(fingerprint["make"])
    for key in ("data_path", "corpus_path"):
        if make.get(key):
            path = ROOT / make[key]
            if not path.exists():
                pytest.skip(f"the kept run's {key} {make[key]} is not beside this checkout ({path})")
            make[key] = str(path)
    return {**fingerprint, "make": make}


def _runs(folder: Path) -> list[tuple[Path, dict]]:
    return [(path, json.loads(path.read_text())) for path in sorted(folder.glob("*.json"))]


def test_there_are_kept_runs():
    assert KEPT and all(list(folder.glob("*.json")) for folder in KEPT)


@pytest.mark.parametrize("folder", KEPT, ids=[d.name for d in KEPT])
def test_kept_runs_are_of_the_preset_as_defined_now_and_say_what_the_log_says(folder):
    setting = merge.preset_setting(json.loads(json.dumps(asdict(presets.PRESETS[folder.name]))))  # tuples as lists, as kept
    for path, run in _runs(folder):
        kept = merge.preset_setting(merge.preset_fields(run["preset"]))
        assert kept == setting, f"{path.name}: the preset changed since it ran: {sorted(k for k in kept.keys() | setting.keys() if kept.get(k) != setting.get(k))}"
        for seed, results in run["results"].items():
            for name, entry in results.items():
                if not (name == "start" or name in NAMES) or "eval_em" not in entry:
                    continue
                em = entry["eval"]["eval/em"]
                assert em == pytest.approx(statistics.mean(entry["eval_em"]), abs=1e-9), f"{path.name}: {name}'s EM is not its questions'"
                row = f"| {folder.name} | start" if name == "start" else f"| {folder.name} | {NAMES[name]} s{seed} |"
                rows = [line for line in LOG.splitlines() if line.startswith(row)]
                assert any(f"| {em:.3f} |" in line for line in rows), f"{path.name}: no row '{row} ... | {em:.3f} |' in the experiment log"


@pytest.mark.parametrize("folder", KEPT, ids=[d.name for d in KEPT])
def test_kept_runs_merge_into_one_report_on_the_env_built_now(folder, tmp_path):
    head, per_seed = merge.merge_results([path for path, _ in _runs(folder)])
    learners = merge.merged_learners(per_seed)
    if learners:
        report = learner_report.write_report(per_seed, learners, head["preset"], head["steps"], tmp_path)
        assert "Paired against the cold start" in report
    for seed, results in per_seed.items():
        fingerprint = _from_the_checkout(results["fingerprint"])
        env = env_factory(fingerprint, cache_dir=False, source=f"{folder.name} seed {seed}")()
        try:
            diffs = differences({"setting": fingerprint["setting"]}, {"setting": jsonable(env_fingerprint(env))})
        finally:
            env.close()
        assert not diffs, format_differences(diffs, "kept run", "built now")
