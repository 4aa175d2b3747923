"""MCP tool calls: Signoff's call path against the SDK client called directly, and one-turn
conversations per second with an MCP tool against the same with a built-in tool."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from mcp import Client, StdioServerParameters

from bench.common import (
    CONCURRENCY,
    machine,
    percentile,
    start_worker,
    stop_process,
    write_section,
)
from bench.throughput import _CompletedCounter
from shared.client import Client as SignoffClient
from shared.local.embedded_redis import EmbeddedRedis
from shared.mcp.store import McpServerStore
from shared.models.mcp import McpServer, McpServerRequest
from shared.settings import Settings
from shared.store.connection import connect
from shared.store.keys import KeySpace
from worker.mcp.pool import McpPool

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "tests.mcp_test_server", "good"]
CALLS = 300
TURNS = 300
ROUNDS = 3


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _http_server() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen([*SERVER, "--http", str(port)], cwd=ROOT)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


async def _direct(target: object) -> list[float]:
    """The SDK client calling `list_notes` directly: one session, sequential calls."""
    async with Client(target, cache=None) as client:  # type: ignore[arg-type]
        await client.call_tool("list_notes", {})
        times = []
        for _ in range(CALLS):
            started = time.perf_counter()
            await client.call_tool("list_notes", {})
            times.append(time.perf_counter() - started)
    return times


def _through_signoff(pool: McpPool, server: McpServer) -> list[float]:
    """The worker's path: a leg's thread -> the background loop -> the session -> the outcome."""
    assert pool.call(server, "list_notes", {}).ok
    times = []
    for _ in range(CALLS):
        started = time.perf_counter()
        outcome = pool.call(server, "list_notes", {})
        times.append(time.perf_counter() - started)
        assert outcome.ok
    return times


def _registered(settings: Settings, request: McpServerRequest) -> tuple[McpPool, McpServer]:
    with SignoffClient(settings) as client:
        store = McpServerStore(client.redis, client.keys)
        store.add(request, actor="bench", replace=True)
    pool = McpPool(settings, McpServerStore(connect(settings), KeySpace.of(settings)))
    server = pool.refresh(request.name)
    assert server is not None and server.offered(), server
    return pool, server


def _call_overhead(env: dict[str, str], url: str) -> dict[str, dict[str, list[float]]]:
    settings = Settings(
        redis_url=env["SIGNOFF_REDIS_URL"],
        key_prefix="mcpcall",
        mcp_allowed_hosts=("127.0.0.1",),
    )
    stdio_request = McpServerRequest(name="stdio", command=" ".join(SERVER), trusted=True)
    http_request = McpServerRequest(name="http", url=url, trusted=True)
    found: dict[str, dict[str, list[float]]] = {"stdio": {}, "http": {}}
    for kind, request, target in (
        ("stdio", stdio_request, StdioServerParameters(command=SERVER[0], args=SERVER[1:])),
        ("http", http_request, url),
    ):
        pool, server = _registered(settings, request)
        for _ in range(ROUNDS):  # alternated: a busy spell of the machine hits both
            found[kind].setdefault("direct", []).extend(asyncio.run(_direct(target)))
            found[kind].setdefault("signoff", []).extend(_through_signoff(pool, server))
        pool.close()
    return found


def _turns(env: dict[str, str], logs: Path, prompt: str, prefix: str) -> float:
    """One-turn conversations per second, each with one auto-run call of the prompt's tool."""
    worker = start_worker(
        {**env, "SIGNOFF_KEY_PREFIX": prefix, "SIGNOFF_WORKER_CONCURRENCY": str(CONCURRENCY)},
        logs / f"{prefix}.log",
    )
    try:
        settings = Settings(redis_url=env["SIGNOFF_REDIS_URL"], key_prefix=prefix)
        with SignoffClient(settings) as client:
            store = McpServerStore(client.redis, client.keys)
            store.add(
                McpServerRequest(name="notes", command=" ".join(SERVER), trusted=True), actor="b"
            )
            client.tasks.refresh_mcp("notes")
            while store.get("notes").refreshed_at is None:
                time.sleep(0.05)
            warm = client.new_conversation(mcp=["notes"], allow_all=True)
            warm.chat_to_completion(prompt)  # the worker's session is open before the clock
            conversations = [
                client.new_conversation(mcp=["notes"], allow_all=True) for _ in range(TURNS)
            ]
            completed = _CompletedCounter(env["SIGNOFF_REDIS_URL"], client.keys.live_all())
            started = time.perf_counter()
            turns = [(c, c.send(prompt)) for c in conversations]
            completed.wait_for(TURNS, timeout_s=300)
            rate = TURNS / (time.perf_counter() - started)
            completed.close()
            responses = [c.wait_for_turn(t, timeout=300) for c, t in turns]
        assert all("returned" in r.text and "failed" not in r.text for r in responses)
        return rate
    finally:
        stop_process(worker)


def _row(name: str, times: list[float], base: float) -> str:
    p50, p99 = percentile(times, 0.5) * 1000, percentile(times, 0.99) * 1000
    return f"| {name} | {p50:.2f} ms | {p99:.2f} ms | {p50 / base:.2f} |"


def run() -> dict[str, float]:
    logs = Path("/tmp") / f"signoff-bench-{uuid.uuid4().hex[:6]}"
    logs.mkdir()
    with EmbeddedRedis() as redis_server:
        env = {
            "SIGNOFF_REDIS_URL": redis_server.url,
            "SIGNOFF_SCRIPTED_TOKEN_DELAY_MS": "0",
            "PYTHONPATH": str(ROOT),
        }
        os.environ.update(env)
        http, url = _http_server()
        try:
            calls = _call_overhead(env, url)
        finally:
            http.kill()
            http.wait()
        mcp_rates, builtin_rates = [], []
        for i in range(ROUNDS):
            mcp_rates.append(_turns(env, logs, "call notes__list_notes {}", f"mcpt{i}"))
            builtin_rates.append(
                _turns(env, logs, 'call calculator {"expression": "6*7"}', f"bit{i}")
            )
    mcp_rate, builtin_rate = max(mcp_rates), max(builtin_rates)
    rows = []
    for kind in ("stdio", "http"):
        base = percentile(calls[kind]["direct"], 0.5) * 1000
        rows.append(_row(f"{kind}: SDK client, direct (baseline)", calls[kind]["direct"], base))
        rows.append(_row(f"{kind}: through Signoff's worker path", calls[kind]["signoff"], base))
    table = "\n".join(rows)
    runs = ", ".join(f"{m:.0f}/{b:.0f}" for m, b in zip(mcp_rates, builtin_rates, strict=True))
    write_section(
        "mcp",
        f"""
## MCP tool calls (`python -m bench mcp`)

A real MCP server written with the SDK (`tests/mcp_test_server.py`, its read-only `list_notes`),
over stdio and over Streamable HTTP on loopback. Machine: {machine()}, shared with other work.

**Call overhead.** {CALLS * ROUNDS} sequential calls each way ({ROUNDS} rounds, alternated): the SDK's
`Client.call_tool` on one open session in this process (the baseline), against Signoff's worker
path on one open session: `McpPool.call` from a plain thread, handed to the background asyncio loop
that owns the session, through Signoff's bounded stdio transport (or the SDK's HTTP transport),
and the result converted and bounded as the tool result step gets it.

| path | p50 | p99 | p50 ratio |
|---|---|---|---|
{table}

**Conversations.** {TURNS} one-turn conversations (scripted model at zero delay; each one tool call
that runs unasked, two model calls), concurrency {CONCURRENCY}, one worker; the best of {ROUNDS}
rounds, alternated. Per round, MCP/built-in per second: {runs}.

| tool | conversations per second | ratio |
|---|---|---|
| built-in `calculator` (baseline) | {builtin_rate:.0f} | 1.00 |
| MCP `notes__list_notes` (stdio, trusted, read-only) | {mcp_rate:.0f} | **{mcp_rate / builtin_rate:.2f}** |

Where an MCP conversation's extra time goes: the call's round trip to the server (the table
above), the server's own CPU (a second Python process, on the same cores as the worker and
Redis), and one more Redis read per leg (the selected servers' records, for the tools offered).
""",
    )
    return {
        "mcp_per_s": mcp_rate,
        "builtin_per_s": builtin_rate,
        "stdio_direct_p50_ms": percentile(calls["stdio"]["direct"], 0.5) * 1000,
        "stdio_signoff_p50_ms": percentile(calls["stdio"]["signoff"], 0.5) * 1000,
        "http_direct_p50_ms": percentile(calls["http"]["direct"], 0.5) * 1000,
        "http_signoff_p50_ms": percentile(calls["http"]["signoff"], 0.5) * 1000,
    }


if __name__ == "__main__":
    print(run())
