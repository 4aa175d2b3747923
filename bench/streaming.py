"""Streaming: round trips per flush, and latency from the worker's flush to a subscriber."""

from __future__ import annotations

import json
import threading
import time

import redis

from bench.common import counting_client, machine, median, percentile, round_trips, write_section
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.events import StepEvent
from shared.models.steps import Step, StepSource, StepStatus, StepTarget, StepType
from shared.settings import Settings
from shared.store.emit import split_message
from shared.store.keys import KeySpace
from worker.writer import Flush, Writer

FLUSHES = 3000
KEYS = KeySpace("benchst")


def _delta(writer: Writer, index: int) -> Flush:
    step = Step(
        step_index=0,
        type=StepType.TEXT_RESPONSE,
        source=StepSource.MODEL,
        target=StepTarget.USER,
        status=StepStatus.ACTIVE,
        content_delta=json.dumps({"n": index, "t": time.perf_counter()}),
    )
    return Flush(
        events=[StepEvent(conversation_id=writer.cid, turn_id="t1", step_index=0, step=step)]
    )


def _subscribe(url: str, cid: str, ready: threading.Event, latencies: list[float]) -> None:
    listener = redis.Redis.from_url(url, decode_responses=True).pubsub()
    listener.subscribe(KEYS.live(cid))
    listener.get_message(timeout=5)  # the subscription's confirmation
    ready.set()
    deadline = time.monotonic() + 120
    while len(latencies) < FLUSHES and time.monotonic() < deadline:
        message = listener.get_message(timeout=1)
        if message is None:
            continue
        _, payload = split_message(message["data"])
        sent = json.loads(json.loads(payload)["step"]["content_delta"])["t"]
        latencies.append(time.perf_counter() - sent)
    listener.close()


def run() -> dict[str, float]:
    with EmbeddedRedis() as server:
        client = counting_client(server.url)
        settings = Settings(redis_url=server.url, key_prefix=KEYS.prefix)
        writer = Writer(
            client, KEYS, settings, "c1", token="", turn_id="t1", max_history_size=0, model="m"
        )
        latencies: list[float] = []
        ready = threading.Event()
        listener = threading.Thread(target=_subscribe, args=(server.url, "c1", ready, latencies))
        listener.start()
        ready.wait()
        writer.write(Flush())  # loads the script into Redis's cache (EVALSHA, then EVAL once)
        trips = [round_trips(lambda i=i: writer.write(_delta(writer, i))) for i in range(FLUSHES)]
        listener.join()
        pings = [round_trips(client.ping) for _ in range(10)]
    ms = [value * 1000 for value in latencies]
    p50, p99 = median(ms), percentile(ms, 0.99)
    write_section(
        "streaming",
        f"""
## Streaming: round trips per flush and flush-to-subscriber latency (`python -m bench streaming`)

{FLUSHES} flushes of one coalesced delta each through the worker's writer (fence check, XADD with
`MAXLEN ~`, PUBLISH to the conversation's and the global channel, checkpoint: one Lua script), read by
a pub/sub subscriber in another thread of the same process; latency is from just before the flush is
sent to the subscriber's receipt. Loopback, private redis-server. Machine: {machine()}.

| measure | value |
|---|---|
| round trips per flush (counted at the socket) | **{max(trips)}** (every flush; a PING is {max(pings)}) |
| latency p50 | {p50:.2f} ms |
| latency p99 | **{p99:.2f} ms** (target: at most 5 ms) |
| messages received | {len(ms)} of {FLUSHES} |
""",
    )
    return {"round_trips_per_flush": max(trips), "p50_ms": p50, "p99_ms": p99, "received": len(ms)}


if __name__ == "__main__":
    print(run())
