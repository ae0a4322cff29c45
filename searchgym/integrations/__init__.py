"""searchgym inside other RL frameworks: one adapter per framework, each translating types and nothing else.

- `searchgym.integrations.openenv`: an OpenEnv environment server (typed action, observation and state;
  one env per WebSocket session) and OpenEnv client; TRL's `GRPOTrainer` drives it through
  `agents.integrations.trl` (`python -m searchgym.integrations.openenv --id SearchQA-Synthetic-v0`).
- `searchgym.integrations.verifiers`: a verifiers (prime-rl) taskset and environment over any searchgym
  id, with `load_environment(**kwargs)`.

Nothing here is imported by `import searchgym`: each module imports its framework, so import the one you
use. The same actions through any adapter give the same observations, rewards, labels and entities as
`gym.make(...)` in-process; each adapter's tests assert exactly that. See docs/frameworks.md.
"""
