"""Runs the named benchmarks (all when none are named) and rewrites docs/benchmarks.md."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = [
    "history",
    "throughput",
    "streaming",
    "approvals",
    "batch",
    "export",
    "web",
    "fsync",
    "webhooks",
    "schedules",
    "mcp",
    "mcp_serve",
    "budgets",
    "routes",
    "latency",
    "metrics",
    "capacity",
    "failover",
    "shards",
]


def main(names: list[str]) -> None:
    for name in names or BENCHMARKS:
        if name not in BENCHMARKS:
            raise SystemExit(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
        print(f"== {name}", flush=True)
        print(importlib.import_module(f"bench.{name}").run(), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
