"""`python -m tools.fuzz`: see `tools.fuzz`."""

from tools.fuzz.driver import main

raise SystemExit(main())
