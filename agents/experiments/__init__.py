"""Experiments with the reference learners: the reference comparison and learning check, and the tools that
evaluate and compare agents against it.

- `learners` (`python -m agents.experiments.learners`): GRPO, CW-GRPO, E-GRPO and COSEARCH trained from one
  cold-started policy with the same seed, questions and budget, evaluated on held-out questions; with two
  or more seeds, the learning check. Its parts: `presets` (the named settings), `runner` (the start policy,
  the learners, seeds, workers), `resume` and `merge` (reading back earlier runs), `report` (tables, paired
  checks, `results.md`), `credit` with `credit_report` and `credit_plot` (the credit view: every learner's
  advantages on one shared batch, `credit.png`).
- `compare` (`python -m agents.experiments.compare`): a new agent (`agent_spec`: a Python callable, an
  OpenAI-compatible endpoint, a model) on the exact envs a `results.json` was evaluated on
  (`fingerprint`), paired question by question (`paired`).
- `eval`, `baseline`, `signatures`, `ranker_cold_start`, `trl_grpo`: evaluate a policy, scripted baselines,
  the papers' signature analyses, COSEARCH's ranker cold start, TRL's GRPOTrainer on searchgym episodes.
- `progress`, `curves`: progress bars for the long phases, the training curves' plot.
- `examples`: scripted agents to compare (docs/benchmark-your-agent.md).

Nothing in `agents` outside this package imports it.
"""
