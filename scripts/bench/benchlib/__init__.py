"""Shared pieces of scripts/bench/bench.py's suites: processes, the emulated cluster, interleaved
rounds, the results table, ringtrain runs, the PyTorch peer and the plots."""
