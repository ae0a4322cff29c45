"""`python -m tools.fuzz`: see `tools.fuzz`."""

from searchgym.cli.run import run_main
from tools.fuzz.driver import main

raise SystemExit(run_main(main))
