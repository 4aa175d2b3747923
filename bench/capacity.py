"""Capacity: what one turn, one resolution and one streamed chunk cost Redis and the worker,
read from Redis's own counters (INFO cpu, stats, commandstats) around each workload, against
a bare Celery no-op task on the same Redis in the same run. docs/scaling.md sizes from these."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from bench import noop_app
from bench.common import (
    machine,
    scripted_stack,
    start_noop_worker,
    start_worker,
    stop_process,
    write_section,
)
from bench.throughput import _CompletedCounter
from bench.web import cpu_seconds
from shared.client import Client
from shared.models.notifications import Allow
from shared.settings import Settings

TURNS = 400
PARKED = 200
STREAMED = 100
TOOL_PROMPT = 'Compute it. call calculator {"expression": "6*7"}'
SHORT = "Say hi."
LONG = " ".join(f"word{n}" for n in range(80))  # echoed back: 80 more text tokens a turn


@dataclass(frozen=True)
class Cost:
    """Redis CPU (ms), commands processed and script calls per unit, and worker CPU (ms)."""

    redis_cpu_ms: float
    commands: float
    scripts: float
    worker_cpu_ms: float = 0.0


class RedisCounters:
    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, decode_responses=True)

    def read(self) -> tuple[float, int, int]:
        cpu: dict[str, Any] = self.client.info("cpu")
        stats: dict[str, Any] = self.client.info("stats")
        commands: dict[str, Any] = self.client.info("commandstats")
        scripts = sum(
            int(commands.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("eval", "evalsha")
        )
        used = float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
        return used, int(stats["total_commands_processed"]), scripts

    def cost(self, before: tuple[float, int, int], units: int, worker_ms: float = 0.0) -> Cost:
        after = self.read()
        return Cost(
            redis_cpu_ms=(after[0] - before[0]) * 1000 / units,
            commands=(after[1] - before[1]) / units,
            scripts=(after[2] - before[2]) / units,
            worker_cpu_ms=worker_ms / units,
        )


def _bare(env: dict[str, str], logs: Path, counters: RedisCounters) -> Cost:
    worker = start_noop_worker(env, logs / "noop.log")
    try:
        celery = noop_app.sender(env["SIGNOFF_REDIS_URL"])
        key = f"bench:noop:{uuid.uuid4().hex}"
        before, cpu = counters.read(), cpu_seconds(worker.pid)
        for _ in range(TURNS):
            celery.send_task("bench.noop", args=[key])
        while int(counters.client.get(key) or 0) < TURNS:
            time.sleep(0.005)
        cost = counters.cost(before, TURNS, (cpu_seconds(worker.pid) - cpu) * 1000)
        celery.close()
        return cost
    finally:
        stop_process(worker)


def _turns(
    client: Client, worker_pid: int, counters: RedisCounters, prompt: str, count: int
) -> tuple[Cost, int]:
    """`count` one-turn conversations, sent at once; the cost per turn and the text chunks."""
    conversations = [client.new_conversation(allow_all=True) for _ in range(count)]
    completed = _CompletedCounter(client.settings.redis_url, client.keys.live_all())
    before, cpu = counters.read(), cpu_seconds(worker_pid)
    turns = [(c, c.send(prompt)) for c in conversations]
    completed.wait_for(count, timeout_s=600)
    cost = counters.cost(before, count, (cpu_seconds(worker_pid) - cpu) * 1000)
    completed.close()
    responses = [c.wait_for_turn(t, timeout=60) for c, t in turns]
    usage = responses[0].usage_metadata
    tokens = usage.candidates_token_count + usage.thoughts_token_count if usage else 0
    return cost, tokens


def _resolutions(client: Client, env: dict[str, str], logs: Path, counters: RedisCounters) -> Cost:
    """Parks `PARKED` turns, stops the worker, then resolves them: the resolutions alone."""
    worker = start_worker(env, logs / "parker.log")
    try:
        conversations = [
            client.new_conversation(tools={"calculator": "ask"}) for _ in range(PARKED)
        ]
        for conversation in conversations:
            conversation.send(TOOL_PROMPT)
        deadline = time.monotonic() + 300
        while client.notifications.count_pending() < PARKED:
            if time.monotonic() > deadline:
                raise TimeoutError("the turns did not park")
            time.sleep(0.05)
    finally:
        stop_process(worker)
    pending = client.notifications.pending_ids(limit=PARKED)
    before = counters.read()
    for nid in pending:
        client.resolve_notification(nid, Allow(), actor="bench")
    return counters.cost(before, len(pending))


def run() -> dict[str, float]:
    with scripted_stack() as (env, logs):
        counters = RedisCounters(env["SIGNOFF_REDIS_URL"])
        bare = _bare(env, logs, counters)
        settings = Settings(redis_url=env["SIGNOFF_REDIS_URL"], key_prefix="cap")
        signoff_env = {**env, "SIGNOFF_KEY_PREFIX": "cap"}
        with Client(settings) as client:
            worker = start_worker(signoff_env, logs / "turns.log")
            try:
                turn, _ = _turns(client, worker.pid, counters, TOOL_PROMPT, TURNS)
            finally:
                stop_process(worker)
            resolution = _resolutions(client, signoff_env, logs, counters)
            streaming_env = {**signoff_env, "SIGNOFF_SCRIPTED_TOKEN_DELAY_MS": "20"}
            worker = start_worker(streaming_env, logs / "streaming.log")
            try:
                short, short_tokens = _turns(client, worker.pid, counters, SHORT, STREAMED)
                long, long_tokens = _turns(client, worker.pid, counters, LONG, STREAMED)
            finally:
                stop_process(worker)
    extra = max(long_tokens - short_tokens, 1)
    chunk = Cost(
        redis_cpu_ms=(long.redis_cpu_ms - short.redis_cpu_ms) / extra,
        commands=(long.commands - short.commands) / extra,
        scripts=(long.scripts - short.scripts) / extra,
        worker_cpu_ms=(long.worker_cpu_ms - short.worker_cpu_ms) / extra,
    )
    figures = {
        "bare_redis_cpu_ms": bare.redis_cpu_ms,
        "turn_redis_cpu_ms": turn.redis_cpu_ms,
        "turn_commands": turn.commands,
        "turn_scripts": turn.scripts,
        "turn_worker_cpu_ms": turn.worker_cpu_ms,
        "bare_worker_cpu_ms": bare.worker_cpu_ms,
        "resolution_redis_cpu_ms": resolution.redis_cpu_ms,
        "resolution_commands": resolution.commands,
        "chunk_redis_cpu_ms": chunk.redis_cpu_ms,
        "chunk_commands": chunk.commands,
        "chunk_worker_cpu_ms": chunk.worker_cpu_ms,
    }
    _report(bare, turn, resolution, chunk, extra)
    return figures


def _report(bare: Cost, turn: Cost, resolution: Cost, chunk: Cost, extra: int) -> None:
    per_core = 1000 / turn.redis_cpu_ms
    write_section(
        "capacity",
        f"""## Capacity: Redis and worker cost per turn, resolution and chunk (`python -m bench capacity`)

{machine()}. One Redis, one `signoff worker` (defaults), the scripted model. Redis's own counters
(INFO cpu, stats, commandstats) read around each workload; the worker's CPU from /proc. Baseline:
a bare Celery no-op task (one pooled client) on the same Redis in the same run. Commands are what
Redis executed in the while (`total_commands_processed`: each command of a pipeline, each one a
script runs, and the workers' idle polling); scripts are EVAL and EVALSHA calls, each one round
trip or part of one. Sizing from these: `docs/scaling.md`.

| per | Redis CPU ms | vs a bare Celery task | commands | scripts | worker CPU ms |
|---|---|---|---|---|---|
| bare Celery no-op task | {bare.redis_cpu_ms:.3f} | 1.00 | {bare.commands:.1f} | {bare.scripts:.1f} | {bare.worker_cpu_ms:.2f} |
| one-turn conversation, one tool call ({TURNS} at once) | {turn.redis_cpu_ms:.3f} | {turn.redis_cpu_ms / bare.redis_cpu_ms:.1f} | {turn.commands:.1f} | {turn.scripts:.1f} | {turn.worker_cpu_ms:.2f} |
| resolution (allow; its continuation queued, not run) | {resolution.redis_cpu_ms:.3f} | {resolution.redis_cpu_ms / bare.redis_cpu_ms:.1f} | {resolution.commands:.1f} | {resolution.scripts:.1f} | - |
| streamed chunk (20 ms a token, {STREAMED} turns streaming at once, {extra} more tokens a turn) | {chunk.redis_cpu_ms:.4f} | {chunk.redis_cpu_ms / bare.redis_cpu_ms:.2f} | {chunk.commands:.2f} | {chunk.scripts:.2f} | {chunk.worker_cpu_ms:.3f} |

One Redis core sustains about **{per_core:.0f} one-turn conversations per second** at this cost
(1000 / Redis CPU ms per turn), and one worker core about **{1000 / turn.worker_cpu_ms:.0f}**:
about {turn.worker_cpu_ms / turn.redis_cpu_ms:.1f} worker cores per Redis core.
""",
    )
