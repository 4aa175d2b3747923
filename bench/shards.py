"""Shards: the same load on one Redis and on a three-primary Redis Cluster, in one run.

Both runs put Celery's broker on a Redis of its own (a cluster cannot be the broker), so the
two differ only in where state lives. For each node the benchmark reads its own counters
(INFO cpu, stats; DBSIZE) around the load and reports how evenly the cluster spreads keys,
commands and CPU (each node's distance from the nodes' mean), and what sharding costs in
all (the cluster's totals against the one Redis's, and turns per second).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from bench.common import machine, start_worker, stop_process, write_section
from bench.throughput import _CompletedCounter
from shared.client import Client
from shared.local.embedded_cluster import RedisClusterNodes
from shared.local.embedded_redis import EmbeddedRedis
from shared.settings import Settings

TURNS = 1200
PRIMARIES = 3
PROMPT = 'Compute it. call calculator {"expression": "6*7"}'
PREFIX = "shards"


@dataclass(frozen=True)
class Node:
    """One Redis's share of a run: CPU seconds, commands, and keys at the end."""

    cpu_s: float
    commands: int
    keys: int


def _counters(client: redis.Redis) -> tuple[float, int]:
    cpu: dict[str, Any] = client.info("cpu")
    stats: dict[str, Any] = client.info("stats")
    used = float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
    return used, int(stats["total_commands_processed"])


def _load(
    env: dict[str, str], settings: Settings, ports: list[int], logs: Path
) -> tuple[list[Node], float]:
    """`TURNS` one-turn conversations with a tool call, sent at once; each node's share and
    the turns per second."""
    nodes = [redis.Redis(port=port, decode_responses=True) for port in ports]
    worker = start_worker(env, logs / f"worker-{len(ports)}.log")
    try:
        with Client(settings) as client:
            conversations = [client.new_conversation(allow_all=True) for _ in range(TURNS)]
            completed = _CompletedCounter(f"redis://127.0.0.1:{ports[0]}/0", client.keys.live_all())
            before = [_counters(node) for node in nodes]
            started = time.perf_counter()
            for conversation in conversations:
                conversation.send(PROMPT)
            completed.wait_for(TURNS, timeout_s=900)
            elapsed = time.perf_counter() - started
            after = [_counters(node) for node in nodes]
            completed.close()
    finally:
        stop_process(worker)
    shares = [
        Node(cpu_s=a[0] - b[0], commands=a[1] - b[1], keys=int(node.dbsize()))
        for node, b, a in zip(nodes, before, after, strict=True)
    ]
    for node in nodes:
        node.close()
    return shares, TURNS / elapsed


def _spread(values: list[float]) -> float:
    """The largest distance of one value from the mean, as a fraction of the mean."""
    mean = statistics.fmean(values)
    return max(abs(v - mean) for v in values) / mean if mean else 0.0


def run() -> dict[str, float]:
    logs = Path("/tmp") / f"signoff-bench-{os.urandom(3).hex()}"
    logs.mkdir()
    base = {
        "SIGNOFF_SCRIPTED_TOKEN_DELAY_MS": "0",
        "SIGNOFF_KEY_PREFIX": PREFIX,
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
    }
    with EmbeddedRedis() as broker, EmbeddedRedis() as single:
        env = {**base, "SIGNOFF_REDIS_URL": single.url, "SIGNOFF_BROKER_URL": broker.url}
        settings = Settings(redis_url=single.url, broker_url=broker.url, key_prefix=PREFIX)
        one, one_rate = _load(env, settings, [single.port], logs)
    with EmbeddedRedis() as broker, RedisClusterNodes(PRIMARIES) as cluster:
        env = {
            **base,
            "SIGNOFF_REDIS_URL": cluster.url,
            "SIGNOFF_REDIS_CLUSTER": "true",
            "SIGNOFF_BROKER_URL": broker.url,
        }
        settings = Settings(
            redis_url=cluster.url, redis_cluster=True, broker_url=broker.url, key_prefix=PREFIX
        )
        three, three_rate = _load(env, settings, cluster.ports, logs)
    figures = {
        "keys_spread": _spread([n.keys for n in three]),
        "commands_spread": _spread([n.commands for n in three]),
        "cpu_spread": _spread([n.cpu_s for n in three]),
        "cpu_total_ratio": sum(n.cpu_s for n in three) / one[0].cpu_s,
        "commands_total_ratio": sum(n.commands for n in three) / one[0].commands,
        "turns_per_s_ratio": three_rate / one_rate,
    }
    _report(one[0], one_rate, three, three_rate, figures)
    return figures


def _report(
    one: Node, one_rate: float, three: list[Node], three_rate: float, figures: dict[str, float]
) -> None:
    rows = "\n".join(
        f"| node {n + 1} of {PRIMARIES} | {node.keys} | {node.commands} | "
        f"{node.cpu_s * 1000 / TURNS:.3f} |"
        for n, node in enumerate(three)
    )
    write_section(
        "shards",
        f"""## Shards: one Redis against a three-primary cluster (`python -m bench shards`)

{machine()}. The same load twice in one run: {TURNS} one-turn conversations with a
tool call (scripted model), sent at once to one `signoff worker` (defaults); Celery's broker on a
Redis of its own both times. First the state on one Redis, then on a Redis Cluster of {PRIMARIES}
primaries on this machine (`SIGNOFF_REDIS_CLUSTER=true`, 12 state shards by default). Each
node's counters (INFO cpu and stats, DBSIZE) read around the load.

| state on | keys | commands | Redis CPU ms per turn |
|---|---|---|---|
| one Redis | {one.keys} | {one.commands} | {one.cpu_s * 1000 / TURNS:.3f} |
{rows}

- Spread over the cluster's nodes (the largest distance of a node from the nodes' mean): keys
  **{figures["keys_spread"]:.1%}**, commands **{figures["commands_spread"]:.1%}**, CPU
  **{figures["cpu_spread"]:.1%}**.
- The cluster's totals against one Redis: CPU **{figures["cpu_total_ratio"]:.2f}x**, commands
  **{figures["commands_total_ratio"]:.2f}x**. Commands barely grow (a reader of a sharded
  index or outbox sends one command per shard); CPU grows more: each node has its own upkeep
  (its cron, the cluster bus, its share of every worker's connections), which this run does
  not separate from the load's.
- Turns per second: {three_rate:.0f} on the cluster against {one_rate:.0f} on one Redis,
  **{figures["turns_per_s_ratio"]:.2f}x**: one worker process is the limit in both runs, and
  the cluster client (a slot computed and a node chosen for every command) costs it CPU.
  Capacity grows with nodes and workers: `docs/scaling.md`.
""",
    )
