"""Benchmarks: `python -m bench [name ...]` runs them and rewrites their sections of docs/benchmarks.md."""
