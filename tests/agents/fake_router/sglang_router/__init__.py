"""A stand-in for the `sglang-router` package, put first on PYTHONPATH by the tests that start it."""
