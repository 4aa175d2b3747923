"""Approvals: resolve-to-continuation latency, memory per parked conversation, inbox page time."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import redis

from bench import noop_app
from bench.common import (
    CONCURRENCY,
    machine,
    median,
    percentile,
    start_noop_worker,
    start_worker,
    stop_process,
    timed,
    write_section,
)
from shared.client import Client, Conversation
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.notifications import Allow
from shared.settings import Settings
from shared.store.emit import split_message

ROOT = Path(__file__).resolve().parent.parent
PARKED = 10_000
LATENCY_SAMPLES = 200
ASK = {"send_email": "ask", "write_file": "ask"}
EMAIL = (
    'call send_email {"to": "ops@example.com", "subject": "Report", "body": "Numbers attached."}'
)
WRITE = 'call write_file {"path": "notes.txt", "content": "draft"}'


def _park(client: Client, prompts: list[str]) -> list[Conversation]:
    conversations = [client.new_conversation(tools=ASK) for _ in prompts]
    for conversation, prompt in zip(conversations, prompts, strict=True):
        conversation.send(prompt)
    while client.notifications.count_pending() < len(prompts):
        time.sleep(0.2)
    return conversations


def _latencies(client: Client, url: str) -> list[float]:
    """Resolve one parked turn at a time; time until its continuation reports `running`."""
    arrived: dict[str, float] = {}
    listener = redis.Redis.from_url(url, decode_responses=True).pubsub()
    listener.subscribe(client.keys.live_all())
    listener.get_message(timeout=5)

    done = threading.Event()

    def listen() -> None:
        while not done.is_set():
            message = listener.get_message(timeout=0.1)
            if message and '"status":"running"' in message["data"]:
                payload = split_message(message["data"])[1]
                cid = payload.split('"conversation_id":"')[1].split('"')[0]
                arrived[cid] = time.perf_counter()

    conversations = _park(client, [EMAIL] * LATENCY_SAMPLES)
    thread = threading.Thread(target=listen)
    thread.start()
    latencies = []
    for conversation in conversations:
        [note] = conversation.pending_notifications()
        arrived.pop(conversation.conversation_id, None)
        started = time.perf_counter()
        client.resolve_notification(note.id, Allow(), actor="bench")
        while conversation.conversation_id not in arrived:
            time.sleep(0.0005)
        latencies.append(arrived[conversation.conversation_id] - started)
        conversation.wait_for_idle(timeout=30)
    done.set()
    thread.join()
    return latencies


def _pickup(url: str, logs: Path) -> list[float]:
    """The floor: a bare Celery task sent, until its first line (a PUBLISH) reaches a subscriber."""
    worker = start_noop_worker(
        {"SIGNOFF_REDIS_URL": url, "PYTHONPATH": str(ROOT)}, logs / "noop.log"
    )
    try:
        celery = noop_app.sender(url)
        channel = f"bench:ping:{uuid.uuid4().hex}"
        listener = redis.Redis.from_url(url).pubsub(ignore_subscribe_messages=True)
        listener.subscribe(channel)
        listener.get_message(timeout=5)
        latencies = []
        for _ in range(LATENCY_SAMPLES):
            started = time.perf_counter()
            celery.send_task("bench.ping", args=[channel])
            while listener.get_message(timeout=5) is None:
                pass
            latencies.append(time.perf_counter() - started)
        listener.close()
        celery.close()
        return latencies
    finally:
        stop_process(worker)


def _memory(client: Client) -> tuple[float, float]:
    """Bytes per parked conversation, and per completed one-turn conversation (the baseline)."""

    def used() -> int:
        return int(client.redis.info("memory")["used_memory"])

    before = used()
    completed = [client.new_conversation() for _ in range(1000)]
    for conversation in completed:
        conversation.send("a one-turn conversation for the baseline")
    for conversation in completed:
        conversation.wait_for_idle(timeout=60)
    per_completed = (used() - before) / len(completed)
    before = used()
    _park(client, [EMAIL if i % 2 else WRITE for i in range(PARKED)])
    return (used() - before) / PARKED, per_completed


def run() -> dict[str, float]:
    logs = Path("/tmp") / f"signoff-bench-{uuid.uuid4().hex[:6]}"
    logs.mkdir()
    with EmbeddedRedis() as server:
        env = {
            "SIGNOFF_REDIS_URL": server.url,
            "SIGNOFF_KEY_PREFIX": "benchap",
            "PYTHONPATH": str(ROOT),
        }
        pickup = [value * 1000 for value in _pickup(server.url, logs)]
        worker = start_worker(env, logs / "worker.log")
        try:
            with Client(Settings(redis_url=server.url, key_prefix="benchap")) as client:
                latencies = [value * 1000 for value in _latencies(client, server.url)]
                per_parked, per_completed = _memory(client)
                pages = [
                    timed(
                        lambda: client.notifications.pending(
                            tool="send_email", offset=2000, limit=50
                        )
                    )
                    for _ in range(50)
                ]
                total = [
                    timed(lambda: client.notifications.pending(offset=5000, limit=50))
                    for _ in range(50)
                ]
                page = client.notifications.pending(tool="send_email", offset=2000, limit=50)
                assert len(page) == 50 and all(n.tool_name == "send_email" for n in page)
        finally:
            stop_process(worker)
    p50, p99 = median(latencies), percentile(latencies, 0.99)
    floor50, floor99 = median(pickup), percentile(pickup, 0.99)
    page_ms, all_ms = median(pages) * 1000, median(total) * 1000
    write_section(
        "approvals",
        f"""
## Approvals (`python -m bench approvals`)

A real worker (thread pool, concurrency 8) and a private redis-server. Machine: {machine()}.

**Resolve to continuation.** {LATENCY_SAMPLES} parked turns resolved one at a time on an otherwise idle
worker; latency is from calling `resolve_notification` (compare-and-set, audit, indexes, `advance` sent)
to the continuation's `running` status event reaching a subscriber. Baseline, in the same run on
the same Redis: a bare Celery task (`bench/noop_app.py`, same Celery settings, thread pool,
concurrency {CONCURRENCY}) sent by name (`send_task`) until the PUBLISH that is its only line reaches a
subscriber: Celery's pickup, the floor under any continuation.

| measure | bare Celery pickup (baseline) | resolve to continuation | ratio | target |
|---|---|---|---|---|
| p50 | {floor50:.1f} ms | **{p50:.1f} ms** | {p50 / floor50:.2f} | 5 ms |
| p99 | {floor99:.1f} ms | **{p99:.1f} ms** | {p99 / floor99:.2f} | 25 ms |

**Memory.** `used_memory` growth of Redis for {PARKED:,} parked conversations (each: conversation,
turn with its checkpoint, history, event stream, the notification, its delivery entries and index
entries), against 1,000 completed one-turn conversations measured in the same run as the baseline.

| conversation | bytes each | ratio |
|---|---|---|
| completed, one turn (baseline) | {per_completed:,.0f} | 1.00 |
| parked on an approval | {per_parked:,.0f} | {per_parked / per_completed:.2f} |

**Inbox page.** One page of 50 pending notifications among {PARKED:,} (half `send_email`, half
`write_file`), median of 50 reads.

| page | median | target |
|---|---|---|
| filtered by tool, offset 2,000 | **{page_ms:.1f} ms** | 50 ms |
| unfiltered, offset 5,000 (baseline) | {all_ms:.1f} ms | |
""",
    )
    return {
        "p50_ms": p50,
        "p99_ms": p99,
        "pickup_p50_ms": floor50,
        "pickup_p99_ms": floor99,
        "bytes_parked": per_parked,
        "bytes_completed": per_completed,
        "page_ms": page_ms,
    }


if __name__ == "__main__":
    print(run())
