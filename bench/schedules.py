"""Schedule precision: how late `signoff beat` fires 1,000 schedules due at the same moment.

The schedules share one cron expression with a seconds field, so all 1,000 fall due
together every SLOT_S seconds: twice the rate of 1,000 every-minute schedules, all due
in the same instant (the worst case of a real minute). Each continues its own
conversation and queues behind a running turn (no worker runs, so every fire queues a
prompt: real work at every slot). A fire's delay is `fired_at - due` from its runs log
(recorded once its prompt is queued and its `advance` sent). The baseline, in the same
run and against the same Redis, is a bare loop that sleeps until the same kind of due
time and does each run's own work (the first time create the conversation; every time
queue the prompt and send `advance`) with no schedule, claim or log: what firing costs
at the least. One beat, then two beats racing for the same slots.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench.common import machine, percentile, write_section
from shared.client import Client
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.agents import NewAgent
from shared.models.schedules import NewSchedule, Overlap, RunMode, RunOutcome, ScheduleRun
from shared.settings import DoubleTextPolicy, Settings
from shared.store.agents import agent_options
from shared.validation import validate_prompt

ROOT = Path(__file__).resolve().parent.parent
SCHEDULES = 1_000
SLOT_S = 30
SLOTS = 2
PROMPT = "Anything new?"


def _beat(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "worker", "beat"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    while "beat: Starting..." not in log.read_text(errors="replace"):
        if process.poll() is not None:
            raise RuntimeError(log.read_text())
        time.sleep(0.1)
    return process


def _next_slot(after: float) -> float:
    return (math.floor(after / SLOT_S) + 1) * SLOT_S


def _scheduled(url: str, beats: int) -> list[float]:
    """Fire delays (s) of SCHEDULES schedules over SLOTS slots, with `beats` beat processes."""
    prefix = f"bs{uuid.uuid4().hex[:6]}"
    settings = Settings(redis_url=url, key_prefix=prefix)
    env = {"SIGNOFF_REDIS_URL": url, "SIGNOFF_KEY_PREFIX": prefix}
    logs = [Path(f"/tmp/signoff-bench-beat-{prefix}-{n}.log") for n in range(beats)]
    with Client(settings) as client:
        stores = client.stores
        stores.agents.create(NewAgent(name="poller", system_prompt="Be brief."), actor="bench")
        cron = f"*/{SLOT_S} * * * * *"
        for n in range(SCHEDULES):
            new = NewSchedule(
                name=f"s{n}",
                agent="poller",
                prompt=PROMPT,
                cron=cron,
                conversation=RunMode.CONTINUE,
                overlap=Overlap.QUEUE,
            )
            stores.schedules.create(new, actor="bench")
        processes = [_beat(env, log) for log in logs]
        try:
            first = stores.schedules.next_due() or time.time()
            slots = {first + n * SLOT_S for n in range(SLOTS)}
            deadline = first + SLOTS * SLOT_S + 60
            while _fired(client, slots) < SCHEDULES * SLOTS and time.time() < deadline:
                time.sleep(1)
            for n in range(SCHEDULES):
                stores.schedules.pause(f"s{n}")
        finally:
            for process in processes:
                process.terminate()
                process.wait(timeout=30)
        delays = []
        for n in range(SCHEDULES):
            runs = stores.schedules.runs(f"s{n}")
            if len({run.due for run in runs}) != len(runs):
                raise RuntimeError(f"schedule s{n} fired a slot twice: {runs}")
            if any(run.outcome is not RunOutcome.SENT for run in runs):
                raise RuntimeError(f"schedule s{n} did not queue every prompt: {runs}")
            delays += [run.fired_at - run.due for run in runs if run.due in slots]
    if len(delays) < SCHEDULES * SLOTS:
        raise RuntimeError(f"only {len(delays)} fires of {SCHEDULES * SLOTS}")
    return delays


def _fired(client: Client, slots: set[float]) -> int:
    """Fires so far of the measured slots, over every schedule."""
    with client.redis.pipeline(transaction=False) as pipe:
        for n in range(SCHEDULES):
            pipe.xrange(client.keys.schedule_runs(f"s{n}"))
        found = pipe.execute()
    return sum(
        ScheduleRun.model_validate_json(fields["run"]).due in slots
        for entries in found
        for _, fields in entries
    )


def _bare(url: str) -> list[float]:
    """The same work at the same kind of due time, from a loop that knows nothing else."""
    settings = Settings(redis_url=url, key_prefix=f"bb{uuid.uuid4().hex[:6]}")
    delays = []
    with Client(settings) as client:
        agent = client.stores.agents.create(NewAgent(name="poller"), actor="bench")
        config = agent_options(agent).resolve(settings, policy_may_loosen=False)
        store = client.store
        for slot in range(SLOTS):
            due = _next_slot(time.time())
            time.sleep(max(0.0, due - time.time()))
            for n in range(SCHEDULES):
                cid = f"bare.{n}"
                if slot == 0:
                    store.create(config, conversation_id=cid)
                store.submit(cid, validate_prompt(PROMPT, settings), DoubleTextPolicy.ENQUEUE)
                client.tasks.advance(cid)
                delays.append(time.time() - due)
    return delays


def _row(name: str, delays: list[float], base: list[float]) -> str:
    p50, p99 = percentile(delays, 0.5), percentile(delays, 0.99)
    b50, b99 = percentile(base, 0.5), percentile(base, 0.99)
    return (
        f"| {name} | {p50 * 1000:.0f} ms | {p99 * 1000:.0f} ms | "
        f"{p50 / b50:.2f}x | {p99 / b99:.2f}x |"
    )


def run() -> str:
    redis_server = EmbeddedRedis().start()
    try:
        base = _bare(redis_server.url)
        one = _scheduled(redis_server.url, beats=1)
        two = _scheduled(redis_server.url, beats=2)
    finally:
        redis_server.stop()
    body = f"""## Schedule precision (`python -m bench schedules`)

{SCHEDULES:,} schedules of one agent, all due at the same instant every {SLOT_S} s (a cron
expression with a seconds field, `*/{SLOT_S} * * * * *`: the fires of {SCHEDULES:,} every-minute
schedules, twice as often and all in the same instant, the worst case of a real minute), {SLOTS}
slots, so {SCHEDULES * SLOTS:,} fires per row. Each continues its own conversation and queues
behind the running turn (`--conversation continue --overlap queue`); no worker runs, so every
fire queues a prompt. Delay: when a fire had queued its prompt and sent `advance`, minus its due
time, from the schedule's runs log. Baseline, same run and Redis: a bare loop that sleeps until
a due time and does only each run's own work (create the conversation the first time; queue the
prompt and send `advance`). Each slot fired exactly once per schedule in every row (checked).

| firing | p50 delay | p99 delay | p50 / baseline | p99 / baseline |
|---|---|---|---|---|
| baseline: bare loop | {percentile(base, 0.5) * 1000:.0f} ms | {percentile(base, 0.99) * 1000:.0f} ms | 1.00x | 1.00x |
{_row("`signoff beat`, one process", one, base)}
{_row("`signoff beat`, two processes", two, base)}

A fire's delay is mostly its place in the line: the {SCHEDULES:,} fires of a slot run one after
another, each a few round trips, so the p99 is the time to work through a slot. Two beats
split a slot's fires between them (claims of 16 slots, in shuffled orders) but share the
machine's cores with Redis: on our two shared cores that row varies most from run to run. {machine()}.
"""
    write_section("schedules", body)
    return body
