"""Reliability tools for a clone of the repository, run as `python -m tools.NAME`: bad-input fuzzers
(`fuzz`, `fuzz_verdicts`, `fuzz_index`), fault injection against the retrieval server (`restart`: killed
and restarted under load; `slowclients`: sockets that send or read slowly), and the load generator and
server process they and the benchmarks share (`loadgen`). docs/reliability.md and docs/faults-and-load.md
say what each checks. Not part of the installed packages."""
