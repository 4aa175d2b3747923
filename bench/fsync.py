"""What `appendfsync always` costs against `everysec`: writes and whole turns, in one run.

Two private redis-servers with AOF on, data directories on the same disk, one set to each
policy. Writes: a flush-shaped Lua script (XADD and HSET, ~300 bytes), one client in
sequence (rounds interleaved between the servers) and eight clients at once. Turns: the
throughput benchmark's one-turn conversations against each server, one after the other.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import redis

from bench.common import CONCURRENCY, machine, median, write_section
from bench.throughput import TURNS, _signoff
from shared.local.embedded_redis import EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ("everysec", "always")
ROUNDS = 10
WRITES_PER_ROUND = 200
REPEATS = 4  # concurrent writes and turns: the policies alternate, the median is kept
CLIENTS = 8
NOISE_RATIO = 0.95  # a ratio of medians above this is within this machine's run-to-run spread
WRITES_PER_CLIENT = 500
FLUSH = """
redis.call('XADD', KEYS[1], 'MAXLEN', '~', 1000, '*', 'event', ARGV[1])
redis.call('HSET', KEYS[2], 'checkpoint', ARGV[1])
return 1
"""
PAYLOAD = "x" * 300


def _writes(client: redis.Redis, count: int, tag: str) -> float:
    """Seconds for `count` flush-shaped writes, one after the other."""
    keys = [f"bench:fsync:{tag}:events", f"bench:fsync:{tag}:turn"]
    started = time.perf_counter()
    for _ in range(count):
        client.eval(FLUSH, 2, *keys, PAYLOAD)
    return time.perf_counter() - started


def _sequential(clients: dict[str, redis.Redis]) -> dict[str, float]:
    """Median µs per write of one client, the policies interleaved round by round."""
    rounds: dict[str, list[float]] = {policy: [] for policy in clients}
    for _ in range(ROUNDS):
        for policy, client in clients.items():
            elapsed = _writes(client, WRITES_PER_ROUND, "seq")
            rounds[policy].append(elapsed / WRITES_PER_ROUND * 1e6)
    return {policy: median(values) for policy, values in rounds.items()}


def _concurrent(url: str) -> float:
    """Writes per second of CLIENTS clients writing at once, each to its own keys."""
    clients = [redis.Redis.from_url(url) for _ in range(CLIENTS)]
    threads = [
        threading.Thread(target=_writes, args=(client, WRITES_PER_CLIENT, f"c{i}"))
        for i, client in enumerate(clients)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    for client in clients:
        client.close()
    return CLIENTS * WRITES_PER_CLIENT / elapsed


def _turns(server: EmbeddedRedis, logs: Path) -> float:
    """One-turn conversations per second against `server` (a fresh key prefix each time)."""
    logs.mkdir(exist_ok=True)
    env = {
        "SIGNOFF_REDIS_URL": server.url,
        "SIGNOFF_SCRIPTED_TOKEN_DELAY_MS": "0",
        "PYTHONPATH": str(ROOT),
    }
    os.environ.update(env)
    redis.Redis(port=server.port).flushdb()
    rate, _, _ = _signoff(env, logs, 20)
    return rate


def _interleaved(
    measure: Callable[[str, EmbeddedRedis], float], servers: dict[str, EmbeddedRedis]
) -> dict[str, list[float]]:
    """REPEATS measures per policy, taking turns in ABBA order (no order bias)."""
    values: dict[str, list[float]] = {policy: [] for policy in servers}
    order = list(servers.items())
    for _ in range(REPEATS):
        for policy, server in order:
            values[policy].append(measure(policy, server))
        order.reverse()
    return values


def _server(policy: str, base: Path) -> EmbeddedRedis:
    server = EmbeddedRedis(data_dir=base / policy, appendonly=True).start()
    client = redis.Redis(port=server.port)
    client.config_set("appendfsync", policy)
    assert client.config_get("appendfsync")["appendfsync"] == policy
    client.close()
    return server


def run() -> dict[str, float]:
    # On the disk that holds the repository (not a tmpfs, where fsync costs nothing).
    base = Path(tempfile.mkdtemp(prefix="signoff-bench-fsync-", dir=ROOT))
    logs = Path("/tmp") / f"signoff-bench-{uuid.uuid4().hex[:6]}"
    logs.mkdir()
    servers = {policy: _server(policy, base) for policy in POLICIES}
    try:
        clients = {p: redis.Redis.from_url(s.url) for p, s in servers.items()}
        sequential = _sequential(clients)
        concurrent = _interleaved(lambda _, server: _concurrent(server.url), servers)
        turns = _interleaved(lambda policy, server: _turns(server, logs / policy), servers)
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    figures = {
        "write_us_everysec": sequential["everysec"],
        "write_us_always": sequential["always"],
        "write_ratio": sequential["always"] / sequential["everysec"],
        **_spread("concurrent", concurrent),
        **_spread("turns", turns),
    }
    write_section("fsync", _report(figures))
    return figures


def _spread(name: str, values: dict[str, list[float]]) -> dict[str, float]:
    """Median, lowest and highest of each policy's measures, and the ratio of the medians."""
    figures: dict[str, float] = {}
    for policy, found in values.items():
        figures |= {
            f"{name}_{policy}": median(found),
            f"{name}_{policy}_low": min(found),
            f"{name}_{policy}_high": max(found),
        }
    figures[f"{name}_ratio"] = figures[f"{name}_always"] / figures[f"{name}_everysec"]
    return figures


def _cell(f: dict[str, float], key: str) -> str:
    return f"{f[key]:.0f} ({f[key + '_low']:.0f} to {f[key + '_high']:.0f})"


def _verdict(f: dict[str, float]) -> str:
    """What the concurrent figures say, in words that follow the numbers."""
    worst = min(f["concurrent_ratio"], f["turns_ratio"])
    if worst >= NOISE_RATIO:
        return (
            "Under concurrency this run shows no throughput lost: the ratios of the medians are "
            f"{f['concurrent_ratio']:.2f} and {f['turns_ratio']:.2f}, within the spread of the "
            "runs on 2 CPUs shared by Redis, the clients and the worker."
        )
    return (
        f"Under concurrency throughput falls to {worst:.2f} of `everysec`'s at worst (writes "
        f"{f['concurrent_ratio']:.2f}, turns {f['turns_ratio']:.2f})."
    )


def _report(f: dict[str, float]) -> str:
    return f"""
## Durability: `appendfsync always` against `everysec` (`python -m bench fsync`)

Two private redis-servers with AOF on, their data on the same disk (ext4 on a virtual disk), one
with `appendfsync everysec` (Redis's default, and the compose file's), one with `always`. A write
is one flush-shaped Lua script (XADD with `MAXLEN ~` and HSET, 300 bytes), as a worker's flush is.
One client: {ROUNDS} rounds of {WRITES_PER_ROUND} writes, the two servers interleaved round by
round, median of the rounds. {CLIENTS} clients: {WRITES_PER_CLIENT} writes each, all at once
(Redis fsyncs once per event-loop pass, so concurrent writers share an fsync). Turns: the
throughput benchmark's {TURNS} one-turn conversations (a tool call, two streamed model calls),
one worker with concurrency {CONCURRENCY}. The last two are measured {REPEATS} times, the
servers taking turns (ABBA), and the median kept. Machine: {machine()}, 2 CPUs shared with the
clients and the worker.

| measure | everysec (baseline) | always | ratio |
|---|---|---|---|
| one client, µs per write | {f["write_us_everysec"]:.0f} | {f["write_us_always"]:.0f} | **{f["write_ratio"]:.2f}** |
| {CLIENTS} clients, writes per second | {_cell(f, "concurrent_everysec")} | {_cell(f, "concurrent_always")} | **{f["concurrent_ratio"]:.2f}** |
| one-turn conversations per second | {_cell(f, "turns_everysec")} | {_cell(f, "turns_always")} | **{f["turns_ratio"]:.2f}** |

(Median of {REPEATS}, lowest to highest in brackets.) The one-client figure is the cost of
`always`: {f["write_ratio"]:.1f} times the latency of a lone write. {_verdict(f)}

`always` adds one fsync ({f["write_us_always"] - f["write_us_everysec"]:.0f} µs here) to every
pass of Redis's event loop that wrote something: a lone writer waits for it on every write, while
concurrent writers share it, and a turn spends most of its time in the worker, not waiting on
Redis. What `everysec` risks instead is in the README's Production notes: a host crash loses up to
the last second of acknowledged writes. The cost depends on the disk's fsync latency above all (a
virtual disk may answer from the host's cache; a disk without a write cache takes milliseconds):
run this on the production disk before choosing.
"""


if __name__ == "__main__":
    print(run())
