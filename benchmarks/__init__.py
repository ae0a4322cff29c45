"""Measurements, each against a named peer or bound, each printing ratios: `bm25` (bm25s vs rank-bm25; the
env vs the bare retriever), `judge_overhead` (the env with and without the gold judge), `retrieval`
(in-process vs the server, per retriever), `load` (the server under concurrent clients vs the in-process
retriever), `rollout_overhead` (the rollout engine vs bare `generate`), `step` (an RL step, new path vs old;
decoding vs its bound), `sb3_ppo` (PPO vs a random policy and the oracle), and `perf`, which runs every
performance ratio in one go. Run them from a clone: `python -m benchmarks.NAME`.

Tools, fuzzers and report code live elsewhere: the reference comparison and the agent evaluations in
`agents.experiments`, the memory plan in `agents.train.memory_plan`, fuzzers and fault injectors in
`tools`. The other modules here are aliases of the commands that moved, kept for one version.
"""
