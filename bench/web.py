"""Web: SSE fan-out from one web process (500 and 2,000 clients), slowloris, SIGTERM with 1,000
streams open, inbox page time."""

from __future__ import annotations

import asyncio
import http.client
import multiprocessing
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

from bench.common import machine, median, peak_rss_mb, percentile, timed, write_section
from shared.client import Client
from shared.local.embedded_redis import EmbeddedRedis, free_port
from shared.models.events import StepEvent
from shared.models.notifications import Notification, ResolutionKind
from shared.models.steps import Step, StepSource, StepStatus, StepTarget, StepType, ToolCall
from shared.models.users import Role
from shared.settings import Settings
from shared.store.keys import KeySpace
from shared.store.notifications import index_commands
from shared.store.users import TokenStore
from webui import create_app
from worker.writer import Flush, Writer

ROOT = Path(__file__).resolve().parent.parent
SIGNOFF = str(Path(sys.executable).with_name("signoff"))
SSE_CLIENTS = 500
MANY_CLIENTS = 2000
EVENTS = 200
EVENT_GAP_S = 0.02
SLOWLORIS = 500
PROBES = 400
STOP_STREAMS = 1000
PENDING = 10_000
PAGE_SAMPLES = 200
_SEQ = re.compile(rb"bench-(\d+)-")
WARM = 999_999
CLOSING = b": closed: server shutting down"


# The web process and what it holds


def _web(
    env: dict[str, str], port: int, log: Path, *, start_timeout_s: float = 30
) -> subprocess.Popen[bytes]:
    """`signoff web` itself (gunicorn with Signoff's gevent worker), answering on `port`."""
    process = subprocess.Popen(
        [SIGNOFF, "web"],
        cwd=ROOT,
        env={**os.environ, **env, "SIGNOFF_WEB_PORT": str(port)},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + start_timeout_s
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
    raise RuntimeError(f"signoff web did not answer in {start_timeout_s:g} s:\n{log.read_text()}")


def _stop_web(web: subprocess.Popen[bytes]) -> None:
    web.terminate()
    try:
        web.wait(timeout=15)
    except subprocess.TimeoutExpired:
        web.kill()
        web.wait()


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


class Setup:
    """A private key prefix with a conversation, a viewer token and a writer for its events."""

    def __init__(self, server: EmbeddedRedis, prefix: str) -> None:
        settings = Settings(redis_url=server.url, key_prefix=prefix)
        self.admin = redis.Redis.from_url(server.url, decode_responses=True)
        self.token = TokenStore(self.admin, KeySpace(prefix)).create("bench", Role.VIEWER)
        with Client(settings) as client:
            self.cid = client.new_conversation().conversation_id
        self.writer = Writer(
            self.admin,
            KeySpace(prefix),
            settings,
            self.cid,
            token="",
            turn_id="t1",
            max_history_size=0,
            model="m",
        )
        self.env = {
            "SIGNOFF_REDIS_URL": server.url,
            "SIGNOFF_KEY_PREFIX": prefix,
            "PYTHONPATH": str(ROOT),
            "SIGNOFF_SECRET_KEY": uuid.uuid4().hex,
            "SIGNOFF_SSE_HEARTBEAT_S": "15",
            "SIGNOFF_WEB_WORKERS": "1",  # one web process: every client on the same worker
        }


def _fan_out_stats(seen: Reception, before: Any, after: Any) -> dict[str, Any]:
    held, cpu_before, own_before, t0 = before
    after_conns, cpu_after, own_after, t1 = after
    last, every, delivered = _delays(seen)
    return {
        "held": held,
        "after": after_conns,
        "last": last,
        "cpu_s": cpu_after - cpu_before,
        "client_cpu_s": own_after - own_before,
        "wall_s": t1 - t0,
        "every": every,
        "delivered": delivered,
        "connected": seen.connected,
        "failures": seen.failures,
    }


def _sse(server: EmbeddedRedis, logs: Path) -> dict[str, Any]:
    """One client (the baseline), then SSE_CLIENTS, then MANY_CLIENTS, on one web process."""
    setup = Setup(server, "benchweb")
    port = free_port()
    web = _web(setup.env, port, logs / "web-fanout.log")
    try:
        idle = len(web_connections(web.pid, server.port, setup.admin))

        def measure() -> tuple[list[dict[str, Any]], float, float, float]:
            own = resource.getrusage(resource.RUSAGE_SELF)
            return (
                web_connections(web.pid, server.port, setup.admin),
                cpu_seconds(web.pid),
                own.ru_utime + own.ru_stime,
                time.monotonic(),
            )

        def fan_out(clients: int) -> dict[str, Any]:
            seen, before, after = asyncio.run(
                _fan_out(port, setup.token, setup.cid, setup.writer, clients, measure)
            )
            return _fan_out_stats(seen, before, after)

        one = fan_out(1)
        many = fan_out(SSE_CLIENTS)
        most = fan_out(MANY_CLIENTS)
        rss = peak_rss_mb(_process_tree(web.pid)[-1])
    finally:
        _stop_web(web)  # streams end at once: no wait for the graceful timeout
        setup.admin.close()
    return {"idle": idle, "single": one["last"], "many": many, "most": most, "rss_mb": rss}


# Slowloris: connections that send their headers a byte at a time


async def _slowloris(port: int, stop: asyncio.Event, counts: dict[str, int]) -> None:
    """One attacker's connection, reopened as soon as the server cuts it, until `stop`."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            counts["refused"] += 1
            await asyncio.sleep(0.5)
            continue
        counts["opened"] += 1
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: bench\r\n")
            while not stop.is_set():
                await writer.drain()
                try:  # the server answers nothing until the headers end: only a close
                    if await asyncio.wait_for(reader.read(1), timeout=1.0) == b"":
                        counts["cut"] += 1
                        break
                except TimeoutError:
                    writer.write(b"X-Slow: a\r\n")  # one more header line a second
        except OSError:
            counts["cut"] += 1
        finally:
            writer.close()


def _probe(port: int, path: str, headers: dict[str, str]) -> float:
    """One request on a new connection, as a new visitor makes it: ms to the full answer."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers={**headers, "Connection": "close"})
        response = connection.getresponse()
        response.read()
    finally:
        connection.close()
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status == 200, (path, response.status)
    return elapsed


def _probes(port: int, setup: Setup) -> tuple[list[float], list[float]]:
    health, api = [], []
    bearer = {"Authorization": f"Bearer {setup.token}"}
    for _ in range(PROBES):
        health.append(_probe(port, "/healthz", {}))
        api.append(_probe(port, f"/api/v1/conversations/{setup.cid}", bearer))
        time.sleep(0.02)
    return health, api


async def _attack(port: int, connections: int, counts: Any, stop: Any) -> None:
    local = {"opened": 0, "cut": 0, "refused": 0}
    done = asyncio.Event()
    attackers = [asyncio.create_task(_slowloris(port, done, local)) for _ in range(connections)]
    while not stop.is_set():
        counts[:] = [local["opened"], local["cut"], local["refused"]]
        await asyncio.sleep(0.1)
    done.set()
    await asyncio.gather(*attackers, return_exceptions=True)


def _attacker(port: int, connections: int, counts: Any, stop: Any) -> None:
    """The slow clients, in a process of their own (as an attacker is): the probes' latency
    is then the server's, not the cost of sharing one interpreter with 500 sockets."""
    asyncio.run(_attack(port, connections, counts, stop))


def _under_slowloris(port: int, setup: Setup) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    counts = context.Array("i", 3)
    stop = context.Event()
    attacker = context.Process(target=_attacker, args=(port, SLOWLORIS, counts, stop))
    attacker.start()
    try:
        deadline = time.monotonic() + 60
        while counts[0] < SLOWLORIS and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(2)  # all of them well into their headers
        started = time.monotonic()
        health, api = _probes(port, setup)
        probing_s = time.monotonic() - started
        opened, cut, refused = counts[:]
    finally:
        stop.set()
        attacker.join(timeout=30)
    return {
        "health": health,
        "api": api,
        "held": opened - cut,
        "probing_s": probing_s,
        "opened": opened,
        "cut": cut,
        "refused": refused,
    }


def _slowloris_bench(server: EmbeddedRedis, logs: Path) -> dict[str, Any]:
    """/healthz and an API read: alone (the baseline), then with SLOWLORIS slow clients held."""
    setup = Setup(server, "benchslow")
    port = free_port()
    web = _web(setup.env, port, logs / "web-slowloris.log")
    try:
        alone_health, alone_api = _probes(port, setup)
        attacked = _under_slowloris(port, setup)
        header_timeout = Settings().web_header_timeout_s
    finally:
        _stop_web(web)
        setup.admin.close()
    return {
        "alone_health": alone_health,
        "alone_api": alone_api,
        "header_timeout_s": header_timeout,
        **attacked,
    }


# SIGTERM with streams open


async def _stream_until_closed(
    port: int, path: str, token: str, connected: list[int], closing: list[int]
) -> None:
    """One SSE client that reads until the server closes; notes whether it got the closing comment."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        received = b""
        while b"retry:" not in received:
            chunk = await reader.read(4096)
            if not chunk:
                return
            received += chunk
        connected.append(1)
        while chunk:
            chunk = await reader.read(4096)
            received = received[-200:] + chunk
            if CLOSING in received:
                closing.append(1)
                received = b""
    except OSError:
        pass
    finally:
        writer.close()


async def _sigterm(
    web: subprocess.Popen[bytes], port: int, setup: Setup, streams: int
) -> dict[str, Any]:
    connected: list[int] = []
    closing: list[int] = []
    path = f"/api/v1/conversations/{setup.cid}/events"
    tasks = [
        asyncio.create_task(_stream_until_closed(port, path, setup.token, connected, closing))
        for _ in range(streams)
    ]
    deadline = time.monotonic() + 60
    while len(connected) < streams and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    opened = len(connected)
    started = time.perf_counter()
    web.terminate()
    while web.poll() is None:
        await asyncio.sleep(0.005)
    exit_s = time.perf_counter() - started
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=10)
    return {"opened": opened, "closing": len(closing), "exit_s": exit_s, "code": web.returncode}


def _sigterm_bench(server: EmbeddedRedis, logs: Path) -> dict[str, Any]:
    """SIGTERM to exit: with no stream (the baseline), then with STOP_STREAMS streams open."""
    setup = Setup(server, "benchstop")
    results = {}
    for streams in (0, STOP_STREAMS):
        port = free_port()
        web = _web(setup.env, port, logs / f"web-stop-{streams}.log")
        try:
            results[streams] = asyncio.run(_sigterm(web, port, setup, streams))
        finally:
            if web.poll() is None:
                web.kill()
                web.wait()
    setup.admin.close()
    return {"idle": results[0], "streams": results[STOP_STREAMS]}


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


def _fan_out_row(name: str, stats: dict[str, Any], clients: int, single: float) -> str:
    last = stats["last"]
    p50, p99 = (median(last), percentile(last, 0.99)) if last else (float("nan"), float("nan"))
    commands = ", ".join(sorted(str(c["cmd"]) for c in stats["held"]))
    per_delivery = stats["cpu_s"] / max(stats["delivered"], 1) * 1e6
    return (
        f"| {name} | {stats['connected']} of {clients} | **{len(stats['held'])}** ({commands}) | "
        f"{stats['delivered']:,} of {EVENTS * clients:,} | {p50:.1f} ({p50 / single:.0f}x) | "
        f"**{p99:.1f}** ({p99 / single:.0f}x) | {median(stats['every']) if stats['every'] else 0:.1f} | "
        f"{per_delivery:.0f} µs ({stats['cpu_s'] / stats['wall_s']:.2f} CPU) | "
        f"{stats['client_cpu_s'] / stats['wall_s']:.2f} CPU |"
    )


def _probe_row(name: str, values: list[float], baseline: list[float], target: str) -> str:
    p99, base99 = percentile(values, 0.99), percentile(baseline, 0.99)
    return (
        f"| {name} | {median(values):.1f} | **{p99:.1f}** | {max(values):.1f} | "
        f"{p99 / base99:.2f} | {target} |"
    )


def run() -> dict[str, float]:
    logs = Path("/tmp") / f"signoff-bench-web-{uuid.uuid4().hex[:6]}"
    logs.mkdir()
    with EmbeddedRedis() as server:
        sse = _sse(server, logs)
        slow = _slowloris_bench(server, logs)
        stop = _sigterm_bench(server, logs)
        pages = _inbox(server)
    many, most = sse["many"], sse["most"]
    single = median(sse["single"])
    small = median(pages["small"])
    idle_stop, stopped = stop["idle"], stop["streams"]
    settings = Settings()
    write_section(
        "web",
        f"""
## Web: SSE fan-out, slow clients, shutdown and the inbox page (`python -m bench web`)

`signoff web` itself (gunicorn with Signoff's gevent worker, `webui/serving.py`), with
`SIGNOFF_WEB_WORKERS=1` so that every client lands on one worker process, against a private
redis-server; the clients run on the same machine: {machine()}, {os.cpu_count()} CPUs. Default
settings otherwise (`SIGNOFF_WEB_REDIS_CONNECTIONS={settings.web_redis_connections}`,
`SIGNOFF_WEB_HEADER_TIMEOUT_S={settings.web_header_timeout_s:g}`,
`SIGNOFF_WEB_SHUTDOWN_TIMEOUT_S={settings.web_shutdown_timeout_s}`).

**SSE fan-out.** N concurrent SSE clients of one conversation (asyncio in the bench process, one raw
socket each, so that parsing costs the client next to nothing; bearer token; all connecting at
once), then {EVENTS} events published {EVENT_GAP_S * 1000:.0f} ms apart through the worker's writer (one
Lua script: XADD + PUBLISH). An event's delay is from just before its flush is sent to the moment
the *last* of the N clients has read it; the ratio is to the same with one client (the baseline,
p50 {single:.2f} ms). Redis connections are counted with CLIENT LIST, keeping the entries whose
address is a socket of the web process (found in `/proc`), while the N clients are connected:
the live feed's one subscription and the command connections of the bounded pool. Web CPU is
the worker's, per delivery, while publishing (events that queued up for a client go out in one
write, so it falls as the load grows); the clients' is the bench process's. At {MANY_CLIENTS:,} clients,
{MANY_CLIENTS / EVENT_GAP_S:,.0f} deliveries a second, the machine's {os.cpu_count()} CPUs run the
web worker, the clients and Redis: where the clients' CPU is near one CPU, the clients are what
falls behind.

| clients | connected | Redis connections (target: at most 3) | deliveries | to last client p50 ms | p99 ms (target < 1,000 at {SSE_CLIENTS}) | to any client p50 ms | web CPU per delivery | clients' CPU |
|---|---|---|---|---|---|---|---|---|
| 1 (baseline) | 1 of 1 | | | {single:.2f} | {percentile(sse["single"], 0.99):.2f} | | | |
{_fan_out_row(str(SSE_CLIENTS), many, SSE_CLIENTS, single)}
{_fan_out_row(f"{MANY_CLIENTS:,}", most, MANY_CLIENTS, single)}

Redis connections of the web process with no client: {sse["idle"]}. Peak memory of the worker
after the {MANY_CLIENTS:,} clients: {sse["rss_mb"]:.0f} MB.

**Slowloris.** {SLOWLORIS} connections from another process, each sending a request line, then one
header line a second, never ending its headers; the server cuts each at the header timeout and
the attacker reopens it at once ({slow["opened"]:,} opened, {slow["cut"]:,} cut during the run, {slow["held"]}
held at the end, {slow["refused"]} refused). Meanwhile {PROBES} `/healthz` and {PROBES} API reads
(`GET /api/v1/conversations/<id>`, bearer token), one after the other, each on a new
connection as a new visitor's, over {slow["probing_s"]:.1f} s (longer than the header timeout, so
the waves of cuts and reconnections fall inside it). Baseline: the same probes with no slow client,
in the same run.

| request | p50 ms | p99 ms | max ms | p99 ratio to no slowloris | target |
|---|---|---|---|---|---|
{_probe_row("`/healthz`, no slowloris (baseline)", slow["alone_health"], slow["alone_health"], "")}
{_probe_row(f"`/healthz`, {SLOWLORIS} slowloris held", slow["health"], slow["alone_health"], "p99 < 100 ms")}
{_probe_row("API read, no slowloris (baseline)", slow["alone_api"], slow["alone_api"], "")}
{_probe_row(f"API read, {SLOWLORIS} slowloris held", slow["api"], slow["alone_api"], "p99 < 200 ms")}

**SIGTERM with streams open.** {STOP_STREAMS:,} SSE clients of one conversation connected (each has
read the stream's first frame), then SIGTERM to `signoff web` (the gunicorn master); time until
the process has exited. Baseline: the same with no stream.

| streams open | exit after SIGTERM | streams that got the closing comment | exit status | target |
|---|---|---|---|---|
| 0 (baseline) | {idle_stop["exit_s"]:.2f} s | | {idle_stop["code"]} | |
| {stopped["opened"]:,} | **{stopped["exit_s"]:.2f} s** ({stopped["exit_s"] / idle_stop["exit_s"]:.1f}x) | {stopped["closing"]:,} of {stopped["opened"]:,} | {stopped["code"]} | < 5 s |

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
        "connections_held": len(many["held"]),
        "connections_held_2000": len(most["held"]),
        "connected_2000": most["connected"],
        "last_client_p50_ms": median(many["last"]),
        "last_client_p99_ms": percentile(many["last"], 0.99),
        "last_client_p99_ms_2000": percentile(most["last"], 0.99) if most["last"] else -1,
        "single_client_p50_ms": single,
        "delivered": many["delivered"],
        "healthz_p99_ms_slowloris": percentile(slow["health"], 0.99),
        "api_p99_ms_slowloris": percentile(slow["api"], 0.99),
        "sigterm_exit_s_1000": stopped["exit_s"],
        "closing_comments": stopped["closing"],
        "inbox_p50_ms": median(pages["/approvals"]),
        "inbox_p99_ms": percentile(pages["/approvals"], 0.99),
    }


if __name__ == "__main__":
    threading.excepthook = lambda args: print(args)
    print(run())
