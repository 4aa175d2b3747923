"""Webhook delivery delay: from an event to its receiver, through the outbox, the worker's
dispatcher and the delivery task, against a direct POST to the same receiver in the same run."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from bench.common import machine, median, percentile, start_worker, write_section
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.webhooks import EndpointRequest, WebhookEvent, WebhookEventKind
from shared.settings import Settings
from shared.store.connection import connect
from shared.store.keys import KeySpace
from shared.store.webhooks import EndpointStore, emit_webhook_event
from shared.webhooks.signing import signed_headers

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "benchwh"
SAMPLES = 200
PACE_S = 0.02  # between two events: a steady stream, not a burst


class _Arrivals:
    """When each event's delivery reached the receiver, by the `sent_at` it carries."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        arrivals = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                now = time.time()
                sent_at = json.loads(raw)["data"]["sent_at"]
                with arrivals.lock:
                    arrivals.delays.append((now - sent_at) * 1000)
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                return

        return Handler

    def wait_for(self, count: int, timeout_s: float = 60) -> list[float]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.delays) >= count:
                    return list(self.delays)
            time.sleep(0.01)
        raise RuntimeError(f"only {len(self.delays)} of {count} deliveries arrived")


def _direct(url: str, secret: str, arrivals: _Arrivals) -> list[float]:
    """The baseline: this process signs and POSTs each event itself, on a kept connection."""
    with httpx.Client(timeout=10) as http:
        for i in range(SAMPLES):
            event = WebhookEvent(
                event_id=f"direct-{i}",
                kind=WebhookEventKind.SCHEDULE_FIRED,
                data={"sent_at": time.time()},
            )
            body = event.body()
            headers = signed_headers(secret, event.event_id, int(time.time()), body)
            http.post(url, content=body, headers=headers)
            time.sleep(PACE_S)
    return arrivals.wait_for(SAMPLES)


def _through_webhooks(
    settings: Settings, arrivals: _Arrivals, *, count: int, run: str
) -> list[float]:
    client, keys = connect(settings), KeySpace(PREFIX)
    arrivals.delays.clear()
    for i in range(count):
        emit_webhook_event(
            client,
            keys,
            WebhookEventKind.SCHEDULE_FIRED,
            {"sent_at": time.time()},
            event_id=f"{run}-{i}",
        )
        time.sleep(PACE_S)
    return arrivals.wait_for(count)


def run() -> dict[str, float]:
    logs = Path("/tmp") / f"signoff-bench-{uuid.uuid4().hex[:6]}"
    logs.mkdir()
    direct, hooked = _Arrivals(), _Arrivals()
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), a.handler()) for a in (direct, hooked)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    urls = [f"http://127.0.0.1:{s.server_address[1]}/hook" for s in servers]
    with EmbeddedRedis() as redis_server:
        settings = Settings(redis_url=redis_server.url, key_prefix=PREFIX)
        endpoint = EndpointStore(connect(settings), KeySpace(PREFIX)).add(
            EndpointRequest(url=urls[1], events=[WebhookEventKind.SCHEDULE_FIRED]), actor="bench"
        )
        env = {
            "SIGNOFF_REDIS_URL": redis_server.url,
            "SIGNOFF_KEY_PREFIX": PREFIX,
            "SIGNOFF_OUTBOUND_ALLOW": "127.0.0.1",  # the receivers are on loopback
        }
        worker = start_worker(env, logs / "worker.log")
        try:
            _through_webhooks(settings, hooked, count=50, run="warm-up")  # connections
            through = _through_webhooks(settings, hooked, count=SAMPLES, run="measured")
            baseline = _direct(urls[0], endpoint.secret, direct)
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    for server in servers:
        server.shutdown()
    figures = {
        "direct_p50_ms": median(baseline),
        "direct_p99_ms": percentile(baseline, 0.99),
        "webhook_p50_ms": median(through),
        "webhook_p99_ms": percentile(through, 0.99),
    }
    _report(figures)
    return figures


def _report(f: dict[str, float]) -> None:
    load = os.getloadavg()[0]
    write_section(
        "webhooks",
        f"""
## Webhook delivery (`python -m bench webhooks`)

A real worker (thread pool, concurrency 8), a private redis-server, and a receiver on a loopback
socket. Machine: {machine()}, load average {load:.1f} at the end of the run (a shared machine: the
tail is mostly other processes' CPU). {SAMPLES} events, one every {PACE_S * 1000:.0f} ms; the delay is from
just before the event is emitted (`emit_webhook_event`: one Lua call that appends it to the outbox)
to its delivery reaching the receiver: the worker's dispatcher reads the outbox (blocking read),
logs the delivery, queues `signoff.webhook.deliver`, and a worker thread signs and POSTs it.
The baseline is this process signing and POSTing each event itself on a kept connection, to a
second receiver, in the same run.

| path | p50 | p99 | p50 ratio |
|---|---|---|---|
| direct POST (baseline) | {f["direct_p50_ms"]:.2f} ms | {f["direct_p99_ms"]:.2f} ms | 1.00 |
| event → outbox → dispatcher → task → POST | **{f["webhook_p50_ms"]:.2f} ms** | **{f["webhook_p99_ms"]:.2f} ms** | {f["webhook_p50_ms"] / f["direct_p50_ms"]:.1f} |

A turn pays only for the outbox command, sent in the pipeline of the flush that ends it (no extra
round trip); the delivery, its retries and a slow endpoint's timeout are all on the worker's
webhook queue.
""",
    )


if __name__ == "__main__":
    print(run())
