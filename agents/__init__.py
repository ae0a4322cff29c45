"""Reference learners for searchgym: policies (in-process, SGLang-served, OpenAI-compatible), token-exact
multi-turn rollouts, and the RL methods built on them. Nothing here is imported by `searchgym`."""
