"""Signoff as an MCP server: a tool call over /mcp and over stdio against the same read by the API.

The same read (a conversation's status) three ways, in one run: `GET /api/v1/conversations/<id>`
(the baseline), the MCP tool `get_conversation` POSTed to `/mcp` on the same `signoff web`
(stateless JSON, per-request era), and the same tool through `signoff mcp serve` driven by the
SDK's ClientSession. Then many clients at once on each web path, since one worker runs one
MCP request's asyncio loop at a time.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from bench.common import machine, median, percentile, write_section
from bench.web import SIGNOFF, _stop_web, _web
from shared.client import Client
from shared.local.embedded_redis import EmbeddedRedis, free_port
from shared.settings import Settings
from shared.store.users import Role, TokenStore

PREFIX = "benchmcp"
SAMPLES = 500
CLIENTS = 32
PER_CLIENT = 50
MODERN = "2026-07-28"


def _call(cid: str) -> bytes:
    envelope = {  # the per-request era's envelope: each request says who it is
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    arguments = {"conversation_id": cid}
    params = {"name": "get_conversation", "arguments": arguments, "_meta": envelope}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    ).encode()


class _Http:
    """One kept-alive connection to the web, and the two requests measured on it."""

    def __init__(self, port: int, token: str, cid: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.auth = {"Authorization": f"Bearer {token}"}
        self.cid = cid

    def api(self) -> None:
        self.connection.request("GET", f"/api/v1/conversations/{self.cid}", headers=self.auth)
        self._read(lambda body: json.loads(body)["id"] == self.cid)

    def mcp(self) -> None:
        headers = {
            **self.auth,
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",  # the per-request era's routing headers
            "Mcp-Name": "get_conversation",
        }
        self.connection.request("POST", "/mcp", body=_call(self.cid), headers=headers)
        self._read(lambda body: not json.loads(body)["result"]["isError"])

    def _read(self, ok: Any) -> None:
        response = self.connection.getresponse()
        body = response.read()
        if response.status != 200 or not ok(body):
            raise RuntimeError(f"{response.status}: {body[:300]!r}")


def _latencies(action: Any, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _throughput(port: int, token: str, cid: str, path: str) -> float:
    """Calls per second with CLIENTS threads, each on its own connection."""
    clients = [_Http(port, token, cid) for _ in range(CLIENTS)]
    barrier = threading.Barrier(CLIENTS + 1)

    def work(client: _Http) -> None:
        barrier.wait()
        for _ in range(PER_CLIENT):
            getattr(client, path)()

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return CLIENTS * PER_CLIENT / (time.perf_counter() - started)


def _stdio(env: dict[str, str], token: str, cid: str) -> list[float]:
    params = StdioServerParameters(
        command=SIGNOFF, args=["mcp", "serve"], env={**os.environ, **env, "SIGNOFF_TOKEN": token}
    )

    async def main() -> list[float]:
        times = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for index in range(SAMPLES + 50):
                started = time.perf_counter()
                result = await session.call_tool("get_conversation", {"conversation_id": cid})
                if result.is_error:
                    raise RuntimeError(str(result.content))
                if index >= 50:  # the first 50 warm up
                    times.append((time.perf_counter() - started) * 1000)
        return times

    return anyio.run(main)


def run() -> dict[str, float]:
    logs = Path("/tmp") / f"signoff-bench-{uuid.uuid4().hex[:6]}"
    logs.mkdir()
    with EmbeddedRedis() as redis_server:
        settings = Settings(redis_url=redis_server.url, key_prefix=PREFIX)
        env = {"SIGNOFF_REDIS_URL": redis_server.url, "SIGNOFF_KEY_PREFIX": PREFIX}
        with Client(settings) as client:
            cid = client.new_conversation().conversation_id
            token = TokenStore(client.redis, client.keys).create("bench", Role.VIEWER)
        port = free_port()
        web = _web({**env, "SIGNOFF_SECRET_KEY": "x" * 32}, port, logs / "web.log")
        try:
            one = _Http(port, token, cid)
            _latencies(one.api, 50), _latencies(one.mcp, 50)  # warm-up
            api, mcp = _latencies(one.api, SAMPLES), _latencies(one.mcp, SAMPLES)
            api_rate = _throughput(port, token, cid, "api")
            mcp_rate = _throughput(port, token, cid, "mcp")
        finally:
            _stop_web(web)
        stdio = _stdio(env, token, cid)
    figures = {
        "api_p50_ms": median(api),
        "api_p99_ms": percentile(api, 0.99),
        "mcp_p50_ms": median(mcp),
        "mcp_p99_ms": percentile(mcp, 0.99),
        "stdio_p50_ms": median(stdio),
        "stdio_p99_ms": percentile(stdio, 0.99),
        "api_per_s": api_rate,
        "mcp_per_s": mcp_rate,
    }
    _report(figures)
    return figures


def _report(f: dict[str, float]) -> None:
    load = os.getloadavg()[0]
    write_section(
        "mcp_serve",
        f"""
## Signoff as an MCP server (`python -m bench mcp_serve`)

The same read, a conversation's status, three ways in one run against a private redis-server:
the API's `GET /api/v1/conversations/<id>` (the baseline) and the MCP tool `get_conversation`
POSTed to `/mcp` (per-request era, JSON), both on one kept-alive connection to `signoff web`
(gunicorn, 2 gevent workers), and the same tool through `signoff mcp serve` driven by the SDK's
ClientSession over stdio. {SAMPLES} calls each, one at a time; then {CLIENTS} clients at once,
{PER_CLIENT} calls each, on each web path. Machine: {machine()}, load average {load:.1f} at the end.

| path | p50 | p99 | p50 ratio |
|---|---|---|---|
| API GET (baseline) | {f["api_p50_ms"]:.2f} ms | {f["api_p99_ms"]:.2f} ms | 1.00 |
| `/mcp` tools/call | **{f["mcp_p50_ms"]:.2f} ms** | **{f["mcp_p99_ms"]:.2f} ms** | {f["mcp_p50_ms"] / f["api_p50_ms"]:.1f} |
| `signoff mcp serve` (stdio) | {f["stdio_p50_ms"]:.2f} ms | {f["stdio_p99_ms"]:.2f} ms | {f["stdio_p50_ms"] / f["api_p50_ms"]:.1f} |

| {CLIENTS} clients at once | calls/s | ratio |
|---|---|---|
| API GET (baseline) | {f["api_per_s"]:.0f} | 1.00 |
| `/mcp` tools/call | **{f["mcp_per_s"]:.0f}** | {f["mcp_per_s"] / f["api_per_s"]:.2f} |

An MCP call through the web pays for the SDK's parsing and validation and for an asyncio loop
built and run per request (`webui/mcp_http.py`); a worker runs one such loop at a time, so the
MCP path's throughput is bounded per worker by its per-call CPU, not by Redis.
""",
    )
