"""Web: SSE fan-out from one web process (connections, publish-to-last-client delay), inbox page time."""

from __future__ import annotations

import asyncio
import os
import re
import resource
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import redis
from flask.testing import FlaskClient

from bench.common import machine, median, percentile, timed, write_section
from shared.client import Client
from shared.local.embedded_redis import EmbeddedRedis, free_port
from shared.models.events import StepEvent
from shared.models.notifications import Notification, ResolutionKind
from shared.models.steps import Step, StepSource, StepStatus, StepTarget, StepType, ToolCall
from shared.settings import Settings
from shared.store.keys import KeySpace
from shared.store.notifications import index_commands
from shared.store.users import Role, TokenStore
from webui import create_app
from worker.writer import Flush, Writer

ROOT = Path(__file__).resolve().parent.parent
SSE_CLIENTS = 500
THREADS = 600
EVENTS = 200
EVENT_GAP_S = 0.02
PENDING = 10_000
PAGE_SAMPLES = 200
_SEQ = re.compile(rb"bench-(\d+)-")
WARM = 999_999


# The web process and what it holds


def _gunicorn(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "--worker-class",
        "gthread",
        "--workers",
        "1",
        "--threads",
        str(THREADS),
        "--bind",
        f"127.0.0.1:{port}",
        "--timeout",
        "0",
        "--graceful-timeout",
        "3",
        "--backlog",
        "2048",
        "webui.wsgi:app",
    ]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(log.read_text())
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"gunicorn did not answer in 30 s:\n{log.read_text()}")


def _process_tree(pid: int) -> list[int]:
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in children:
            found += _process_tree(int(child))
    return found


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _local_ports_to(port: int, inodes: set[str]) -> set[int]:
    """Local ports of the established TCP connections to `port` among these sockets."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port and inode in inodes:
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of the process and its children (the gunicorn worker)."""
    total = 0.0
    for member in _process_tree(pid):
        fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def web_connections(pid: int, redis_port: int, admin: redis.Redis) -> list[dict[str, Any]]:
    """The CLIENT LIST entries whose address is a socket of the web process (master and workers)."""
    inodes: set[str] = set()
    for member in _process_tree(pid):
        inodes |= _socket_inodes(member)
    ports = _local_ports_to(redis_port, inodes)
    clients: list[dict[str, Any]] = admin.client_list()
    return [c for c in clients if int(str(c["addr"]).rsplit(":", 1)[1]) in ports]


# SSE clients and the publisher


class Reception:
    """When each client received each event, and when each event was published."""

    def __init__(self, clients: int) -> None:
        self.received: list[dict[int, float]] = [{} for _ in range(clients)]
        self.published: dict[int, float] = {}
        self.connected = 0
        self.failures: list[str] = []


async def _client(
    port: int, path: str, token: str, index: int, seen: Reception, stop: asyncio.Event
) -> None:
    """One SSE client on a raw socket: the HTTP parsing costs next to nothing, so the delay measured
    is the server's, not the client's."""
    mine = seen.received[index]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        seen.failures.append(f"client {index}: {exc!r}")
        return
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            body = await reader.read(500)
            seen.failures.append(f"client {index}: {head.splitlines()[0]!r} {body[-200:]!r}")
            return
        seen.connected += 1
        tail = b""
        while not stop.is_set():
            chunk = await reader.read(65536)
            if not chunk:
                return
            now = time.perf_counter()
            text = tail + chunk
            for found in _SEQ.finditer(text):
                mine.setdefault(int(found[1]), now)
            tail = text[-24:]
    except (OSError, asyncio.IncompleteReadError) as exc:
        if not stop.is_set():
            seen.failures.append(f"client {index}: {exc!r}")
    finally:
        writer.close()


def _delta(writer: Writer, seq: int) -> Flush:
    step = Step(
        step_index=0,
        type=StepType.TEXT_RESPONSE,
        source=StepSource.MODEL,
        target=StepTarget.USER,
        status=StepStatus.ACTIVE,
        content_delta=f"bench-{seq}-",
    )
    return Flush(
        events=[StepEvent(conversation_id=writer.cid, turn_id="t1", step_index=0, step=step)]
    )


def _publish(writer: Writer, seen: Reception, first: int, count: int) -> None:
    for seq in range(first, first + count):
        seen.published[seq] = time.perf_counter()
        writer.write(_delta(writer, seq))
        time.sleep(EVENT_GAP_S)


async def _fan_out(
    port: int, token: str, cid: str, writer: Writer, clients: int, measure: Any
) -> tuple[Reception, Any, Any]:
    """`clients` SSE clients of one conversation; EVENTS events published once all are connected."""
    seen, stop = Reception(clients), asyncio.Event()
    path = f"/api/v1/conversations/{cid}/events"
    tasks = [asyncio.create_task(_client(port, path, token, i, seen, stop)) for i in range(clients)]
    deadline = time.monotonic() + 60
    while seen.connected + len(seen.failures) < clients and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    # A client is subscribed once it has read a warm-up event.
    while time.monotonic() < deadline:
        await asyncio.to_thread(writer.write, _delta(writer, WARM))
        await asyncio.sleep(0.5)
        if sum(1 for got in seen.received if WARM in got) >= seen.connected:
            break
    before = measure()
    await asyncio.to_thread(_publish, writer, seen, 0, EVENTS)
    end = time.monotonic() + 10
    while time.monotonic() < end and any(
        len(got) < EVENTS + 1 for got in seen.received[: seen.connected]
    ):
        await asyncio.sleep(0.05)
    after = measure()
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return seen, before, after


def _delays(seen: Reception) -> tuple[list[float], list[float], int]:
    """Per event: the delay to the last client (ms); every single delivery's delay; deliveries."""
    last, every, delivered = [], [], 0
    for seq, sent in seen.published.items():
        times = [got[seq] for got in seen.received if seq in got]
        delivered += len(times)
        if times:
            last.append((max(times) - sent) * 1000)
            every += [(t - sent) * 1000 for t in times]
    return last, every, delivered


def _sse(server: EmbeddedRedis, logs: Path) -> dict[str, Any]:
    prefix = "benchweb"
    settings = Settings(redis_url=server.url, key_prefix=prefix)
    admin = redis.Redis.from_url(server.url, decode_responses=True)
    token = TokenStore(admin, KeySpace(prefix)).create("bench", Role.VIEWER)
    with Client(settings) as client:
        cid = client.new_conversation().conversation_id
    writer = Writer(
        admin,
        KeySpace(prefix),
        settings,
        cid,
        token="",
        turn_id="t1",
        max_history_size=0,
        model="m",
    )
    port = free_port()
    env = {
        "SIGNOFF_REDIS_URL": server.url,
        "SIGNOFF_KEY_PREFIX": prefix,
        "PYTHONPATH": str(ROOT),
        "SIGNOFF_SECRET_KEY": uuid.uuid4().hex,
        "SIGNOFF_SSE_HEARTBEAT_S": "15",
    }
    web = _gunicorn(env, port, logs / "gunicorn.log")
    try:
        idle = len(web_connections(web.pid, server.port, admin))

        def measure() -> tuple[list[dict[str, Any]], float, float, float]:
            own = resource.getrusage(resource.RUSAGE_SELF)
            return (
                web_connections(web.pid, server.port, admin),
                cpu_seconds(web.pid),
                own.ru_utime + own.ru_stime,
                time.monotonic(),
            )

        one, _, _ = asyncio.run(_fan_out(port, token, cid, writer, 1, measure))
        many, (held, cpu_before, own_before, t0), (after, cpu_after, own_after, t1) = asyncio.run(
            _fan_out(port, token, cid, writer, SSE_CLIENTS, measure)
        )
    finally:
        web.terminate()  # open SSE streams keep it up to the graceful timeout
        try:
            web.wait(timeout=15)
        except subprocess.TimeoutExpired:
            web.kill()
            web.wait()
        admin.close()
    single_last, _, _ = _delays(one)
    last, every, delivered = _delays(many)
    return {
        "idle": idle,
        "held": held,
        "after": after,
        "single": single_last,
        "last": last,
        "cpu_s": cpu_after - cpu_before,
        "client_cpu_s": own_after - own_before,
        "wall_s": t1 - t0,
        "every": every,
        "delivered": delivered,
        "connected": many.connected,
        "failures": many.failures,
    }


# The inbox page


def _fill_inbox(client: redis.Redis, keys: KeySpace, count: int) -> None:
    """`count` pending notifications, written as `park` writes them (hash and index entries)."""
    now = time.time()
    with client.pipeline(transaction=False) as pipe:
        for i in range(count):
            cid = f"c{i // 10:05d}"
            tool = "send_email" if i % 2 else "write_file"
            call = ToolCall(id=f"call_{i}", name=tool, args={"to": "ops@example.com", "n": i})
            note = Notification(
                id=f"{cid}.n{i:05d}",
                conversation_id=cid,
                turn_id="t1",
                title=f"Allow {tool}?",
                body=f"The agent wants to run {tool}",
                tool_call=call,
                allowed=[ResolutionKind.ALLOW, ResolutionKind.DENY],
                created_at=now - count + i,
                expires_at=now + 86_400,
            )
            pipe.hset(
                keys.notification(note.id),
                mapping={"doc": note.model_dump_json(), "status": "pending"},
            )
            for key, members in index_commands(keys, note):
                pipe.zadd(key, members)
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()


def _request_ms(http: FlaskClient, path: str, headers: dict[str, str]) -> float:
    return timed(lambda: http.get(path, headers=headers).close()) * 1000


def _page_times(
    server: EmbeddedRedis, prefix: str, pending: int, paths: list[str]
) -> dict[str, list[float]]:
    settings = Settings(redis_url=server.url, key_prefix=prefix, secret_key=uuid.uuid4().hex)
    app = create_app(settings)
    svc = app.extensions["signoff"]
    try:
        _fill_inbox(svc.redis, svc.keys, pending)
        headers = {"Authorization": f"Bearer {svc.tokens.create('bench', Role.OPERATOR)}"}
        http = app.test_client()
        times: dict[str, list[float]] = {}
        for path in paths:
            response = http.get(path, headers=headers)
            assert response.status_code == 200, (path, response.status_code)
            times[path] = [_request_ms(http, path, headers) for _ in range(PAGE_SAMPLES)]
        assert f'id="pending-count">{pending}<' in http.get("/approvals", headers=headers).text
        return times
    finally:
        svc.close()


def _inbox(server: EmbeddedRedis) -> dict[str, list[float]]:
    small = _page_times(server, "benchsmall", 10, ["/healthz", "/approvals"])
    big = _page_times(
        server,
        "benchbig",
        PENDING,
        [
            "/approvals",
            "/approvals?offset=5000",
            "/approvals?tool=send_email&offset=2000",
            "/approvals/bulk?tool=send_email&decision=allow",
            "/api/v1/notifications?limit=50",
        ],
    )
    return {"healthz": small["/healthz"], "small": small["/approvals"], **big}


# The report


def _row(name: str, values: list[float], baseline: float, target: str = "") -> str:
    return (
        f"| {name} | {median(values):.1f} | {percentile(values, 0.99):.1f} | "
        f"{median(values) / baseline:.2f} | {target} |"
    )


def run() -> dict[str, float]:
    logs = Path("/tmp") / f"signoff-bench-web-{uuid.uuid4().hex[:6]}"
    logs.mkdir()
    with EmbeddedRedis() as server:
        sse = _sse(server, logs)
        pages = _inbox(server)
    held = sse["held"]
    commands = ", ".join(sorted(f"{c['cmd']}" for c in held))
    p50, p99 = median(sse["last"]), percentile(sse["last"], 0.99)
    single = median(sse["single"])
    every50 = median(sse["every"])
    small = median(pages["small"])
    write_section(
        "web",
        f"""
## Web: SSE fan-out and the inbox page (`python -m bench web`)

One web process as `signoff web` runs it (gunicorn, gthread, 1 worker with {THREADS} threads) against a
private redis-server; the clients run in the bench process, on the same machine: {machine()},
{os.cpu_count()} CPUs.

**SSE fan-out.** {SSE_CLIENTS} concurrent SSE clients of one conversation (asyncio, one raw socket each,
so that parsing costs the client next to nothing; bearer token; all connected at once), then {EVENTS} events
published {EVENT_GAP_S * 1000:.0f} ms apart through the worker's writer (one Lua script: XADD + PUBLISH). The delay of an event is from just before its flush is
sent to the moment the *last* of the {SSE_CLIENTS} clients has read it. Baseline: the same with one client.
Redis connections are counted with CLIENT LIST, keeping the entries whose address is a socket of the
web process (found in `/proc`): the live feed's one subscription, and the two command connections of the
web process's bounded pool (`webui/services.py`; before it, the 500 concurrent connects opened 100
connections and then failed with "Too many connections").

The delay is CPU: {SSE_CLIENTS} clients at one event per {EVENT_GAP_S * 1000:.0f} ms are
{SSE_CLIENTS / EVENT_GAP_S:,.0f} deliveries a second, each a thread waking and a socket write in the web
process, on a machine whose {os.cpu_count()} CPUs also run the clients and Redis. Events that queue up for
a client are sent in one write.

| measure | value | target |
|---|---|---|
| clients connected | {sse["connected"]} of {SSE_CLIENTS} ({len(sse["failures"])} failed) | |
| Redis connections of the web process, idle | {sse["idle"]} | |
| Redis connections of the web process, {SSE_CLIENTS} clients connected | **{len(held)}** ({commands}) | at most 3 |
| Redis connections after the events | {len(sse["after"])} | |
| deliveries | {sse["delivered"]} of {EVENTS * SSE_CLIENTS} | all |
| publish to last client, p50 | **{p50:.1f} ms** (ratio to one client: {p50 / single:.1f}) | |
| publish to last client, p99 | **{p99:.1f} ms** (ratio to one client: {p99 / single:.1f}) | |
| publish to any client, p50 (every delivery) | {every50:.1f} ms | |
| one client (baseline), p50 | {single:.2f} ms | |
| web process CPU per delivery (while publishing) | {sse["cpu_s"] / max(sse["delivered"], 1) * 1e6:.0f} µs ({sse["cpu_s"] / sse["wall_s"]:.1f} CPUs busy) | |
| clients' CPU per delivery (the bench process, same machine) | {sse["client_cpu_s"] / max(sse["delivered"], 1) * 1e6:.0f} µs | |

**Inbox page.** {PENDING:,} pending notifications written as the worker's `park` writes them (the
notification hash and its index entries), half `send_email`, half `write_file`. Server time per request
through the Flask test client (the whole WSGI request: authentication, Redis reads, template), {PAGE_SAMPLES}
requests each. Baseline: the inbox with 10 pending, measured in the same run; `/healthz` for scale.

| request | median ms | p99 ms | ratio to 10 pending | target |
|---|---|---|---|---|
{_row("`/healthz`", pages["healthz"], small)}
{_row("`/approvals`, 10 pending (baseline)", pages["small"], small)}
{_row(f"`/approvals`, {PENDING:,} pending", pages["/approvals"], small, "100 ms")}
{_row("`/approvals?offset=5000`", pages["/approvals?offset=5000"], small, "100 ms")}
{_row("`/approvals?tool=send_email&offset=2000`", pages["/approvals?tool=send_email&offset=2000"], small, "100 ms")}
{_row("bulk preview, 5,000 matching (`/approvals/bulk?tool=send_email`)", pages["/approvals/bulk?tool=send_email&decision=allow"], small)}
{_row("`GET /api/v1/notifications?limit=50`", pages["/api/v1/notifications?limit=50"], small)}
""",
    )
    return {
        "connections_held": len(held),
        "last_client_p50_ms": p50,
        "last_client_p99_ms": p99,
        "single_client_p50_ms": single,
        "inbox_p50_ms": median(pages["/approvals"]),
        "inbox_p99_ms": percentile(pages["/approvals"], 0.99),
        "inbox_small_p50_ms": small,
        "delivered": sse["delivered"],
    }


if __name__ == "__main__":
    threading.excepthook = lambda args: print(args)
    print(run())
