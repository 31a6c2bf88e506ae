"""bench.py's suites, one module each (see bench.py)."""
