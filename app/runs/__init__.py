"""Runs: starting learning loops, executing them durably, and reading their results."""
