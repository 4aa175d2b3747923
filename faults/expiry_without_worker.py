"""Expiry with no worker: approvals reach their deadline while only `signoff beat` runs.

A worker parks the turns (each with a short `approval_timeout_s`, sent a little apart so
the deadlines spread), then stops, before the first deadline. Every notification must
expire within one sweep interval of its deadline (by Redis's clock, which judges it); a
resolution tried just after the deadline, before any sweep, must be refused, and so must
every one after. Then a worker comes back and each turn ends, its tool never run.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

from faults.checks import Turns, audit, effect_runs, parked_on, wait_terminal
from faults.harness import Service, stack
from faults.report import Result
from shared.client import Client
from shared.errors import Conflict
from shared.models.notifications import Allow, Notification, NotificationStatus

__all__ = ["FULL", "QUICK", "Size", "run"]

LATE_BY_S = 0.03  # how long after the deadline the late resolutions are tried
SLACK_S = 0.5  # a sweep's own run time and the scheduler's jitter on a busy machine


@dataclass(frozen=True)
class Size:
    notifications: int
    approval_timeout_s: int
    sweep_interval_s: float = 0.5
    stagger_s: float = 0.1  # between prompts


QUICK = Size(notifications=6, approval_timeout_s=8)
FULL = Size(notifications=24, approval_timeout_s=12)


def run(size: Size, workdir: Path, rng: random.Random) -> Result:
    result = Result(
        "expiry with no worker",
        f"{size.notifications} approvals, sweep every {size.sweep_interval_s} s",
    )
    env = {"SIGNOFF_SWEEP_INTERVAL_S": str(size.sweep_interval_s)}
    with stack("expiry", workdir, **env) as built, built.client() as client:
        beat = built.beat()
        parker = built.worker("parker", concurrency=4)
        beat.wait_ready()
        parker.wait_ready()
        turns, notes = _park(client, size)
        parker.stop()
        first = min(n.expires_at or 0 for n in notes)
        if client.notifications.clock() >= first:
            raise RuntimeError("parking took longer than the approval timeout; raise it")
        late, accepted = _resolve_late(client, notes, rng)
        settled = _wait_expired(client, notes, size, beat)
        _judge(result, client, settled, size, accepted=accepted, tried=len(late))
        built.worker("heir", concurrency=4).wait_ready()
        left = wait_terminal(client, turns, 60)
        if left:
            result.fail(f"{left} turn(s) did not end once a worker came back")
        result.absorb(audit(client, turns, built.effects))
        ran = sum(effect_runs(built.effects).values())
        if ran:
            result.fail(f"expired approvals' tools ran {ran} times")
    return result


def _park(client: Client, size: Size) -> tuple[Turns, list[Notification]]:
    turns: Turns = {}
    for index in range(size.notifications):
        conversation = client.new_conversation(
            tools={"record_effect": "ask"}, approval_timeout_s=size.approval_timeout_s
        )
        turn = conversation.send(f'call record_effect {{"note": "expire-{index}"}}')
        turns[conversation.conversation_id] = [turn]
        time.sleep(size.stagger_s)
    deadline = time.monotonic() + size.approval_timeout_s
    while time.monotonic() < deadline:
        nids = parked_on(client, turns)
        if len(nids) == len(turns):
            return turns, client.notifications.load(nids)
        time.sleep(0.05)
    raise RuntimeError(f"not every conversation parked in {size.approval_timeout_s} s")


def _resolve_late(
    client: Client, notes: list[Notification], rng: random.Random
) -> tuple[list[str], int]:
    """Half the notifications (at random), each allowed just after its deadline.

    Returns the ids tried and how many resolutions were accepted (each one is a failure).
    """
    chosen = sorted(rng.sample(notes, len(notes) // 2), key=lambda n: n.expires_at or 0)
    accepted = 0
    for note in chosen:
        assert note.expires_at is not None
        while client.notifications.clock() < note.expires_at + LATE_BY_S:
            time.sleep(0.002)
        accepted += _accepted(client, note.id)
    return [n.id for n in chosen], accepted


def _accepted(client: Client, nid: str) -> int:
    try:
        client.resolve_notification(nid, Allow(), actor="late-operator")
    except Conflict:
        return 0
    return 1


def _wait_expired(
    client: Client, notes: list[Notification], size: Size, beat: Service
) -> list[Notification]:
    last = max(n.expires_at or 0 for n in notes)
    deadline = time.monotonic() + (last - client.notifications.clock()) + 10
    ids = [n.id for n in notes]
    while time.monotonic() < deadline:
        settled = client.notifications.load(ids)
        if all(n.status is not NotificationStatus.PENDING for n in settled):
            return settled
        time.sleep(0.05)
    if not beat.alive:
        raise RuntimeError(f"beat died:\n{beat.tail()}")
    return client.notifications.load(ids)


def _judge(
    result: Result,
    client: Client,
    settled: list[Notification],
    size: Size,
    *,
    accepted: int,
    tried: int,
) -> None:
    lateness = []
    for note in settled:
        if note.status is not NotificationStatus.EXPIRED or note.resolved_at is None:
            result.fail(f"{note.id} is {note.status.value}, not expired")
            continue
        assert note.expires_at is not None
        lateness.append(note.resolved_at - note.expires_at)
    overdue = [s for s in lateness if s > size.sweep_interval_s + SLACK_S or s < 0]
    accepted += sum(_accepted(client, note.id) for note in settled)  # after: refused too
    result.late = len(overdue) + accepted
    result.stranded += sum(1 for n in settled if n.status is NotificationStatus.PENDING)
    if lateness:
        result.notes.append(
            f"expired {min(lateness):.3f}-{max(lateness):.3f} s after the deadline (a sweep "
            f"every {size.sweep_interval_s} s, slack {SLACK_S} s); {tried} resolutions tried "
            f"{LATE_BY_S * 1000:.0f} ms after the deadline and {len(settled)} after expiry: "
            f"{accepted} accepted"
        )
