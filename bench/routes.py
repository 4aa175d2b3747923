"""Approval routing delay: from a request filed to its email accepted by an SMTP server and to
its Slack message posted, through the notification stream, the worker's route notifier and
the route tasks, against this process sending the same email and post directly, same run."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

from bench.common import machine, median, percentile, start_worker, write_section
from shared.local.embedded_redis import EmbeddedRedis, free_port
from shared.models.notifications import DeliveryEntry, Notification, ResolutionKind
from shared.models.routes import EmailRecipient, Route
from shared.models.steps import ToolCall
from shared.settings import Settings, SmtpSecurity
from shared.slack import SlackApi
from shared.store.connection import connect
from shared.store.keys import KeySpace
from shared.store.notifications import index_commands
from shared.store.routes import RouteStore
from worker.routes.email import approval_message, send_message

PREFIX = "benchroutes"
SAMPLES = 100
PACE_S = 0.05  # between two requests: a steady stream, not a burst
SECRET = "bench-secret-key-not-for-production"


class _Arrivals:
    """When each request's email or post arrived, by the request id it carries."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.lock = threading.Lock()

    def note(self, text: str) -> None:
        now = time.time()
        for word in text.replace('"', " ").replace("`", " ").split():
            if word.startswith("bench") and "." in word:
                with self.lock:
                    self.at.setdefault(word, now)

    def delays(self, started: dict[str, float], timeout_s: float = 60) -> list[float]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if all(nid in self.at for nid in started):
                    return [(self.at[nid] - t0) * 1000 for nid, t0 in started.items()]
            time.sleep(0.01)
        raise RuntimeError(f"only {len(self.at)} of {len(started)} arrived")


class _Smtp:
    def __init__(self, arrivals: _Arrivals) -> None:
        self.arrivals = arrivals

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.arrivals.note(envelope.content.decode(errors="replace"))
        return "250 OK"


def _slack_server(arrivals: _Arrivals) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            arrivals.note(json.loads(raw).get("text", ""))
            body = json.dumps({"ok": True, "channel": "C1", "ts": "1.1"}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _note(i: int, run: str) -> Notification:
    return Notification(
        id=f"bench{run}.n{i}",
        conversation_id=f"bench{run}",
        turn_id="t",
        title="Allow send_email?",
        tool_call=ToolCall(id=f"c{i}", name="send_email", args={"to": "x@example.com"}),
        allowed=[ResolutionKind.ALLOW, ResolutionKind.DENY],
        created_at=time.time(),
    )


def _file(settings: Settings, count: int, run: str) -> dict[str, float]:
    """Files requests as a parking worker does (record, indexes, global delivery entry)."""
    client, keys = connect(settings), KeySpace(PREFIX)
    started: dict[str, float] = {}
    for i in range(count):
        note = _note(i, run)
        started[note.id] = time.time()
        with client.pipeline(transaction=False) as pipe:
            pipe.hset(
                keys.notification(note.id),
                mapping={"doc": note.model_dump_json(), "status": "pending"},
            )
            for key, members in index_commands(keys, note):
                pipe.zadd(key, members)
            pipe.xadd(keys.notification_stream(0), DeliveryEntry.interaction(note).fields())  # type: ignore[arg-type]
            pipe.execute()
        time.sleep(PACE_S)
    return started


def _direct(
    settings: Settings, mails: _Arrivals, posts: _Arrivals
) -> tuple[list[float], list[float]]:
    """The baseline: this process composes and sends each email and post itself."""
    mail_started: dict[str, float] = {}
    post_started: dict[str, float] = {}
    api = SlackApi(settings)
    try:
        for i in range(SAMPLES):
            note = _note(i, "direct")
            mail_started[note.id] = time.time()
            message = approval_message(note, to="a@example.test", sender="s@example.test", link="x")
            send_message(settings, message)
            post_started[note.id] = time.time()
            api.post_request("approvals", note)
            time.sleep(PACE_S)
    finally:
        api.close()
    return mails.delays(mail_started), posts.delays(post_started)


def run() -> dict[str, float]:
    logs = Path("/tmp") / f"signoff-bench-{uuid.uuid4().hex[:6]}"
    logs.mkdir()
    mails, posts = _Arrivals(), _Arrivals()
    smtp_port = free_port()
    controller = Controller(_Smtp(mails), hostname="127.0.0.1", port=smtp_port)
    controller.start()
    slack = _slack_server(posts)
    slack_url = f"http://127.0.0.1:{slack.server_address[1]}/api"
    try:
        with EmbeddedRedis() as redis_server:
            env = {
                "SIGNOFF_REDIS_URL": redis_server.url,
                "SIGNOFF_KEY_PREFIX": PREFIX,
                "SIGNOFF_OUTBOUND_ALLOW": "127.0.0.1",
                "SIGNOFF_SMTP_HOST": "127.0.0.1",
                "SIGNOFF_SMTP_PORT": str(smtp_port),
                "SIGNOFF_SMTP_SECURITY": "none",
                "SIGNOFF_SECRET_KEY": SECRET,
                "SIGNOFF_SLACK_BOT_TOKEN": "xoxb-bench",
                "SIGNOFF_SLACK_API_URL": slack_url,
            }
            settings = Settings(
                redis_url=redis_server.url,
                key_prefix=PREFIX,
                outbound_allow=("127.0.0.1",),
                smtp_host="127.0.0.1",
                smtp_port=smtp_port,
                smtp_security=SmtpSecurity.NONE,
                secret_key=SECRET,
                slack_bot_token="xoxb-bench",
                slack_api_url=slack_url,
            )
            recipient = EmailRecipient(approver="bench", address="bench@example.test")
            route = Route(name="all", email=[recipient], slack_channel="approvals")
            RouteStore(connect(settings), KeySpace(PREFIX)).add(route)
            worker = start_worker(env, logs / "worker.log")
            time.sleep(1.0)  # both Celery workers are ready: let their start settle
            try:
                warm = _file(settings, 20, "warm")
                mails.delays(warm), posts.delays(warm)
                started = _file(settings, SAMPLES, "measured")
                routed_mail, routed_post = mails.delays(started), posts.delays(started)
                direct_mail, direct_post = _direct(settings, mails, posts)
            finally:
                worker.terminate()
                worker.wait(timeout=30)
    finally:
        controller.stop()
        slack.shutdown()
    figures = {
        "direct_email_p50_ms": median(direct_mail),
        "direct_email_p99_ms": percentile(direct_mail, 0.99),
        "routed_email_p50_ms": median(routed_mail),
        "routed_email_p99_ms": percentile(routed_mail, 0.99),
        "direct_slack_p50_ms": median(direct_post),
        "direct_slack_p99_ms": percentile(direct_post, 0.99),
        "routed_slack_p50_ms": median(routed_post),
        "routed_slack_p99_ms": percentile(routed_post, 0.99),
    }
    _report(figures)
    return figures


def _report(f: dict[str, float]) -> None:
    load = os.getloadavg()[0]
    write_section(
        "routes",
        f"""
## Approval routing (`python -m bench routes`)

A real worker, a private redis-server, an SMTP server (aiosmtpd) and a Slack API stand-in on
loopback. Machine: {machine()}, load average {load:.1f} at the end of the run. {SAMPLES} requests,
one every {PACE_S * 1000:.0f} ms, each filed as a parking worker files it (record, indexes, global
delivery entry); one route mails each to one approver (with a signed link) and posts it to a
channel. The delay is from just before the request is filed to the SMTP server accepting the
email, and to the stand-in receiving `chat.postMessage`: the route notifier reads the stream
(blocking read), sets the once-only markers, queues `signoff.route.email` and
`signoff.route.slack`, and worker threads send them. The baseline is this process composing and
sending the same email (stdlib smtplib, a new SMTP session each, as the task does) and post,
in the same run.

| path | p50 | p99 | p50 ratio |
|---|---|---|---|
| direct email (baseline) | {f["direct_email_p50_ms"]:.2f} ms | {f["direct_email_p99_ms"]:.2f} ms | 1.00 |
| request → notifier → task → SMTP | **{f["routed_email_p50_ms"]:.2f} ms** | **{f["routed_email_p99_ms"]:.2f} ms** | {f["routed_email_p50_ms"] / f["direct_email_p50_ms"]:.1f} |
| direct Slack post (baseline) | {f["direct_slack_p50_ms"]:.2f} ms | {f["direct_slack_p99_ms"]:.2f} ms | 1.00 |
| request → notifier → task → chat.postMessage | **{f["routed_slack_p50_ms"]:.2f} ms** | **{f["routed_slack_p99_ms"]:.2f} ms** | {f["routed_slack_p50_ms"] / f["direct_slack_p50_ms"]:.1f} |
""",
    )


if __name__ == "__main__":
    print(run())
