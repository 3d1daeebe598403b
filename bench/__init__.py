"""Benchmarks: `make bench` (or `python -m bench`) writes bench/RESULTS.md and bench/results.json."""
