"""Observability's cost: one-turn conversations per second with metrics served (their values in
the run's files, scraped during the run) and traces sent (to an OTLP/HTTP sink on loopback)
against both off (metrics in process memory, no tracer)."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.common import (
    CONCURRENCY,
    machine,
    median,
    scripted_stack,
    start_worker,
    stop_process,
    write_section,
)
from bench.throughput import _CompletedCounter
from bench.web import cpu_seconds
from shared.client import Client
from shared.local.embedded_redis import free_port
from shared.settings import Settings

TURNS = 300
ROUNDS = 6
SAMPLED = 0.1  # the share of turns traced in the third configuration
PROMPT = "Summarise the quarterly report in one short sentence for the board."


class _Sink:
    """Takes OTLP/HTTP posts and counts their bytes: a collector that keeps nothing."""

    def __init__(self) -> None:
        self.received = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                sink.received += len(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@contextmanager
def _sink() -> Iterator[_Sink]:
    sink = _Sink()
    try:
        yield sink
    finally:
        sink.server.shutdown()
        sink.server.server_close()


def _turns(
    env: dict[str, str], logs: Path, prefix: str, *, ratio: float | None, sink: _Sink
) -> tuple[float, float]:
    """One-turn conversations per second and the worker's CPU ms per turn; with a `ratio`, the
    worker serves metrics (scraped once while the turns run) and sends that share of its
    turns' traces to `sink`."""
    served = ratio is not None
    port = free_port() if served else 0
    worker_env = {
        **env,
        "SIGNOFF_KEY_PREFIX": prefix,
        "SIGNOFF_WORKER_CONCURRENCY": str(CONCURRENCY),
        "SIGNOFF_METRICS_PORT": str(port),
        "SIGNOFF_METRICS_DIR": str(logs / "metrics"),
        "SIGNOFF_OTEL_ENDPOINT": sink.endpoint if served else "",
        "SIGNOFF_OTEL_SAMPLE_RATIO": str(ratio if ratio is not None else 1.0),
    }
    worker = start_worker(worker_env, logs / f"{prefix}.log")
    try:
        settings = Settings(redis_url=env["SIGNOFF_REDIS_URL"], key_prefix=prefix)
        with Client(settings) as client:
            client.new_conversation().chat_to_completion("warm up")
            conversations = [client.new_conversation() for _ in range(TURNS)]
            completed = _CompletedCounter(env["SIGNOFF_REDIS_URL"], client.keys.live_all())
            started, cpu = time.perf_counter(), cpu_seconds(worker.pid)
            turns = [(c, c.send(PROMPT)) for c in conversations]
            if served:
                completed.wait_for(TURNS // 2, timeout_s=300)
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    assert b"signoff_turns_started_total" in r.read()
            completed.wait_for(TURNS, timeout_s=300)
            rate = TURNS / (time.perf_counter() - started)
            cpu_ms = (cpu_seconds(worker.pid) - cpu) * 1000 / TURNS
            completed.close()
            responses = [c.wait_for_turn(t, timeout=300) for c, t in turns]
        assert all(r.text.startswith("[demo model]") for r in responses)
        return rate, cpu_ms
    finally:
        stop_process(worker)


def run() -> dict[str, float]:
    runs: dict[float | None, list[tuple[float, float]]] = {None: [], 1.0: [], SAMPLED: []}
    with scripted_stack() as (env, logs), _sink() as sink:
        for i in range(ROUNDS):  # each configuration once a round, the order turning
            order = list(runs)[i % 3 :] + list(runs)[: i % 3]
            for ratio in order:
                found = _turns(env, logs, f"m{i}{order.index(ratio)}", ratio=ratio, sink=sink)
                runs[ratio].append(found)
        traced_kb = sink.received / 1024
    off, on, sampled = ([rate for rate, _ in runs[k]] for k in (None, 1.0, SAMPLED))
    cpu_off, cpu_on, cpu_sampled = (median([c for _, c in runs[k]]) for k in runs)
    paired = median([a / b for a, b in zip(on, off, strict=True)])
    paired_sampled = median([a / b for a, b in zip(sampled, off, strict=True)])
    per_round = ", ".join(
        f"{a:.0f}/{b:.0f}/{c:.0f}" for a, b, c in zip(off, on, sampled, strict=True)
    )
    write_section(
        "metrics",
        f"""
## Metrics and traces: turns per second with both on (`python -m bench metrics`)

Machine: {machine()}, shared with other work.

{TURNS} one-turn conversations (scripted model at zero delay), concurrency {CONCURRENCY}, one
`signoff worker`. On: `SIGNOFF_METRICS_PORT` set, so every value the worker records goes to
its run's files (prometheus-client's multiprocess mode, `docs/observability.md`) and the port
is scraped once halfway through, and `SIGNOFF_OTEL_ENDPOINT` set, so each turn's spans (the
turn, two model calls, the Celery task) go over OTLP/HTTP to a sink on loopback
({traced_kb:.0f} KB in all); off: the same series counted in process memory, no tracer.
{ROUNDS} rounds, each an off run, an on run tracing every turn and an on run tracing
{SAMPLED:.0%} of them (`SIGNOFF_OTEL_SAMPLE_RATIO={SAMPLED}`), back to back, the order
turning. Per round, off/on/sampled per second: {per_round}.

| metrics and traces | conversations per second (best round) | ratio |
|---|---|---|
| off (baseline) | {max(off):.0f} | 1.00 |
| on, every turn traced | {max(on):.0f} | {max(on) / max(off):.2f} |
| on, {SAMPLED:.0%} of turns traced | {max(sampled):.0f} | {max(sampled) / max(off):.2f} |
| on (every turn traced)/off, median of the rounds' ratios | | **{paired:.2f}** (target: at least 0.95) |
| on ({SAMPLED:.0%} traced)/off, median of the rounds' ratios | | **{paired_sampled:.2f}** |

The worker's CPU time per turn (its process tree, median of the rounds): off
{cpu_off:.2f} ms, on {cpu_on:.2f} ms ({cpu_on / cpu_off:.2f}x), on with {SAMPLED:.0%} traced
{cpu_sampled:.2f} ms ({cpu_sampled / cpu_off:.2f}x).

Where the rounds swing both ways by more than the difference between their two runs (see the
per-round figures), the wall-clock ratio measures this shared machine more than the metrics
and traces; the worker's CPU per turn is the steadier measure of what they cost.
""",
    )
    return {
        "on_per_s": max(on),
        "off_per_s": max(off),
        "ratio": paired,
        "ratio_sampled": paired_sampled,
        "cpu_ms_sampled": cpu_sampled,
        "cpu_ms_on": cpu_on,
        "cpu_ms_off": cpu_off,
        "traced_kb": traced_kb,
    }


if __name__ == "__main__":
    print(run())
