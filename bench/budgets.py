"""Budgets: the model call's reservation and settlement against the price read it replaces,
and one-turn conversations per second (and the worker's CPU per turn) with budgets on against
off, in alternating blocks served by one worker."""

from __future__ import annotations

import time
from pathlib import Path

from bench.common import (
    CONCURRENCY,
    counting_client,
    machine,
    median,
    percentile,
    round_trips,
    scripted_stack,
    start_worker,
    stop_process,
    write_section,
)
from bench.throughput import _CompletedCounter
from bench.web import cpu_seconds
from shared.client import Client
from shared.models.budgets import BudgetKind, BudgetSpec
from shared.models.prices import PriceSpec
from shared.settings import Settings
from shared.store.budgets import BudgetStore, today
from shared.store.keys import KeySpace
from shared.store.prices import PriceStore
from worker.budget import RESERVE_SCRIPT, SCOPES

CALLS = 2_000
BLOCK = 100  # one-turn conversations per block
PAIRS = 40  # blocks with budgets on and off, in pairs
PROMPT = "Summarise the quarterly report in one short sentence for the board."


def _call_overhead(url: str) -> dict[str, list[float]]:
    """Per call: the reservation script (4 budgets, each with limits) against the HGET of the
    price that a call without budgets would make; and the round trips of each."""
    client = counting_client(url)
    keys = KeySpace("bcall")
    prices, budgets = PriceStore(client, keys), BudgetStore(client, keys)
    prices.set(
        "scripted", "signoff-demo", PriceSpec(input_per_mtok=1, output_per_mtok=2), actor="b"
    )
    names = {"conversation": "c1", "batch": "b1", "agent": "a1", "owner": "o1"}
    client.hset(keys.conversation("c1"), "status", "idle")
    client.hset(keys.batch("b1"), "status", "running")
    for scope, name in names.items():
        budgets.set(BudgetKind(scope), name, BudgetSpec(tokens=10**12, cost=10**6))
    day = today()
    script_keys = [
        keys.prices(),
        *(budgets.limit_key(BudgetKind(s), names[s]) for s in SCOPES),
        *(budgets.spend_key(BudgetKind(s), names[s], day) for s in SCOPES),
        keys.rate_pause("scripted"),
        keys.lease("c1"),
    ]
    client.set(keys.lease("c1"), "7")  # a leg's lease, checked as the worker's call checks it
    active = '["conversation","batch","agent","owner"]'
    args = ["scripted/signoff-demo", 120, 256, active, 86400, "", "7"]
    found: dict[str, list[float]] = {"price": [], "reserve": []}
    warm = RESERVE_SCRIPT(client, script_keys, args)  # the script is cached: EVALSHA
    assert warm[0] == 1
    trips = {
        "price": round_trips(lambda: prices.get("scripted", "signoff-demo")),
        "reserve": round_trips(lambda: RESERVE_SCRIPT(client, script_keys, args)),
    }
    for _ in range(CALLS):  # alternated, so a busy spell of the machine hits both
        started = time.perf_counter()
        prices.get("scripted", "signoff-demo")
        found["price"].append(time.perf_counter() - started)
        started = time.perf_counter()
        RESERVE_SCRIPT(client, script_keys, args)
        found["reserve"].append(time.perf_counter() - started)
    found["trips"] = [float(trips["price"]), float(trips["reserve"])]
    return found


class _Blocks:
    """One worker, blocks of one-turn conversations with budgets on and off in turn.

    On: each conversation under its own token budget and its owner (`bench-on`) under a daily
    one; off: conversations of an owner with no budget at all. One worker process serves both,
    so its start-up, its warmth and the machine's slower spells fall on both alike.
    """

    def __init__(self, client: Client, worker_pid: int, url: str) -> None:
        self.client, self.worker_pid = client, worker_pid
        self.completed = _CompletedCounter(url, client.keys.live_all())
        client.stores.budgets.set(BudgetKind.OWNER, "bench-on", BudgetSpec(tokens=10**12))
        self.seen = 0

    def run(self, *, budgets: bool) -> tuple[float, float]:
        """One block: conversations per second and the worker's CPU ms per turn."""
        owner = "bench-on" if budgets else "bench-off"
        conversations = [self.client.new_conversation(owner=owner) for _ in range(BLOCK)]
        if budgets:
            for conversation in conversations:
                self.client.stores.budgets.set(
                    BudgetKind.CONVERSATION, conversation.conversation_id, BudgetSpec(tokens=10**9)
                )
        started, cpu = time.perf_counter(), cpu_seconds(self.worker_pid)
        turns = [(c, c.send(PROMPT)) for c in conversations]
        self.seen += BLOCK
        self.completed.wait_for(self.seen, timeout_s=300)
        rate = BLOCK / (time.perf_counter() - started)
        cpu_ms = (cpu_seconds(self.worker_pid) - cpu) * 1000 / BLOCK
        responses = [c.wait_for_turn(t, timeout=300) for c, t in turns]
        assert all(r.text.startswith("[demo model]") for r in responses)
        if budgets:
            store = self.client.stores.budgets
            unsettled = [
                c.conversation_id
                for c in conversations
                if not store.get(BudgetKind.CONVERSATION, c.conversation_id).spent_tokens
            ]
            assert not unsettled, f"budgets not settled: {unsettled[:3]}"
        return rate, cpu_ms

    def close(self) -> None:
        self.completed.close()


def _turns(
    env: dict[str, str], logs: Path
) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """`PAIRS` pairs of blocks, (on, off) each, which of the two goes first alternating."""
    worker = start_worker(
        {**env, "SIGNOFF_KEY_PREFIX": "bturns", "SIGNOFF_WORKER_CONCURRENCY": str(CONCURRENCY)},
        logs / "bturns.log",
    )
    try:
        settings = Settings(redis_url=env["SIGNOFF_REDIS_URL"], key_prefix="bturns")
        with Client(settings) as client:
            blocks = _Blocks(client, worker.pid, env["SIGNOFF_REDIS_URL"])
            try:
                blocks.run(budgets=True)  # warm-up: both paths once, not counted
                blocks.run(budgets=False)
                pairs = []
                for i in range(PAIRS):
                    if i % 2 == 0:
                        on, off = blocks.run(budgets=True), blocks.run(budgets=False)
                    else:
                        off, on = blocks.run(budgets=False), blocks.run(budgets=True)
                    pairs.append((on, off))
            finally:
                blocks.close()
        return pairs
    finally:
        stop_process(worker)


def run() -> dict[str, float]:
    with scripted_stack() as (env, logs):
        calls = _call_overhead(env["SIGNOFF_REDIS_URL"])
        pairs = _turns(env, logs)
    price_p50, reserve_p50 = (percentile(calls[k], 0.5) * 1000 for k in ("price", "reserve"))
    price_p99, reserve_p99 = (percentile(calls[k], 0.99) * 1000 for k in ("price", "reserve"))
    price_trips, reserve_trips = (int(n) for n in calls["trips"])
    rate_ratios = sorted(on[0] / off[0] for on, off in pairs)
    cpu_ratios = sorted(on[1] / off[1] for on, off in pairs)
    # Over every block of a kind: all its turns over all its time, all its CPU over its turns.
    rate_on, rate_off = (PAIRS / sum(1 / pair[k][0] for pair in pairs) for k in (0, 1))
    cpu_on, cpu_off = (sum(pair[k][1] for pair in pairs) / PAIRS for k in (0, 1))
    paired, cpu_paired = median(rate_ratios), median(cpu_ratios)
    quartiles = [percentile(rate_ratios, q) for q in (0.25, 0.75)]
    cpu_quartiles = [percentile(cpu_ratios, q) for q in (0.25, 0.75)]
    write_section(
        "budgets",
        f"""
## Budgets: reservation and settlement per model call (`python -m bench budgets`)

Machine: {machine()}, shared with other work.

**Per model call.** Before each call the worker runs `worker/lua/reserve.lua`: it reads the
model's price (which a call must read anyway, to count its cost) and reserves the call's worst
case against every budget over it. The settlement rides on the flush that records the call
(`worker/lua/flush.lua`), so budgets add **{reserve_trips - price_trips} Redis round trips** per
call: {reserve_trips} for the reservation, where a call without budgets makes {price_trips} (the
price's HGET), and 0 for the settlement. In a turn the reservation itself goes in the
round trip of the flush before the call (the turn's start, a tool's result: `Writer.carrying`). {CALLS} calls each, alternated, on loopback, with all
four budgets (conversation, batch, agent, owner) limited in tokens and money:

| per call | p50 | p99 |
|---|---|---|
| price read alone (HGET, no budgets) | {price_p50:.3f} ms | {price_p99:.3f} ms |
| reservation with the price (EVAL, 4 budgets) | {reserve_p50:.3f} ms | {reserve_p99:.3f} ms |
| added per call | {reserve_p50 - price_p50:+.3f} ms | |

**Conversations.** One worker (concurrency {CONCURRENCY}, scripted model at zero delay) serves
{PAIRS} pairs of blocks of {BLOCK} one-turn conversations, one block with budgets on and one
with them off, which of the two goes first alternating (after one of each to warm up). On:
each conversation under its own token budget and its owner under a daily one (so each call
checks and settles two); off: conversations of an owner with no budget (the reservation script
still runs, finding none: it is how a call reads its price). The same worker serving both, in
blocks a second or so long, lets a slow spell of the machine fall on both alike; each pair's
ratio is of two blocks run back to back.

| budgets | conversations per second (all blocks) | worker CPU per turn (all blocks) |
|---|---|---|
| off (baseline) | {rate_off:.0f} | {cpu_off:.2f} ms |
| on | {rate_on:.0f} | {cpu_on:.2f} ms |
| on/off, all blocks | **{rate_on / rate_off:.2f}** (target: at least 0.95) | **{cpu_on / cpu_off:.2f}** |
| on/off, median of the pairs' ratios | {paired:.2f} (quartiles {quartiles[0]:.2f}-{quartiles[1]:.2f}) | {cpu_paired:.2f} (quartiles {cpu_quartiles[0]:.2f}-{cpu_quartiles[1]:.2f}) |

The worker's CPU per turn is the steadier of the two figures: the wall clock also counts the
time the machine's other work takes the cores from the worker.
""",
    )
    return {
        "price_p50_ms": price_p50,
        "reserve_p50_ms": reserve_p50,
        "added_round_trips": reserve_trips - price_trips,
        "on_per_s": rate_on,
        "off_per_s": rate_off,
        "ratio": rate_on / rate_off,
        "paired_ratio": paired,
        "cpu_ratio": cpu_on / cpu_off,
        "paired_cpu_ratio": cpu_paired,
        "cpu_ms_on": cpu_on,
        "cpu_ms_off": cpu_off,
    }


if __name__ == "__main__":
    print(run())
