"""searchgym in other RL frameworks: one adapter module (or small subpackage) per framework.

- `searchgym.integrations.openenv`: an OpenEnv environment server and client (with TRL's OpenEnv path);
- `searchgym.integrations.verifiers`: a verifiers multi-turn environment (`load_environment`);
- `searchgym.integrations.skyrl`: a SkyRL-gym `BaseTextEnv`, registered as `"searchgym"`;
- `searchgym.integrations.gem`: GEM environments (`gem.make("searchgym:<id>")`), which ROLL and Oat take;
- `searchgym.integrations.verl`: a verl agent loop, a parquet data-prep command and a GRPO config.

Each adapter translates types and nothing else: the same actions give the same observations, rewards,
labels and entities as the `gym.make(...)` env. Importing `searchgym` imports none of them, nor any
framework; each needs its own extra (`pip install 'searchgym[openenv]'`, ...). docs/frameworks.md shows each
one in use and what each framework receives of the step info.
"""
