"""Schedule records in Redis, and the atomic claim that makes each slot fire once.

`signoff:schedules:due` holds each active schedule's next fire time (integer ms). A beat
process that finds a slot due claims it with a compare-and-set on that score: only the
caller that still sees the slot's score moves it on to the next slot, so with any number
of beat processes each slot is handed to exactly one. What a fire did is appended to the
schedule's runs stream and summed up in its state hash.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis
from pydantic import ValidationError

from shared.errors import Conflict, CorruptRecord, InvalidInput, NotFound
from shared.models.schedules import (
    NewSchedule,
    RunOutcome,
    Schedule,
    ScheduleRun,
    ScheduleStatus,
)
from shared.models.webhooks import WebhookEvent, WebhookEventKind
from shared.store.agents import AgentStore
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript
from shared.store.webhooks import emit_webhook_event, queue_event

__all__ = ["MAX_QUEUED_RUNS", "Claim", "ScheduleStore", "to_ms"]

MAX_QUEUED_RUNS = 10  # fires an `overlap: queue` schedule keeps waiting behind a running one
_RUNS_MAXLEN = 1_000
_SHOWN_NEXT = 5
_SKIPS = {RunOutcome.SKIPPED, RunOutcome.MISSED}

_CLAIM = LuaScript(
    "shared.store",
    "schedule_claim.lua",
    keys=["due", "claimed"],
    args=["request"],
    decode=["request"],
)
_RECLAIM = LuaScript(
    "shared.store", "schedule_reclaim.lua", keys=["claimed"], args=["request"], decode=["request"]
)

_TAKE_QUEUED = LuaScript(
    "shared.store",
    "schedule_take_queued.lua",
    keys=["state", "queue"],
    args=["after", "run_prefix"],
)


def to_ms(moment: float) -> int:
    return round(moment * 1000)


@dataclass(frozen=True)
class Claim:
    """A slot a beat claimed and has not yet fired: whose, which, and since when (ms)."""

    name: str
    due_ms: int
    claimed_ms: int

    @property
    def member(self) -> str:
        return _claim_member(self.name, self.due_ms)


def _claim_member(name: str, due_ms: int) -> str:
    return f"{due_ms}:{name}"


class ScheduleStore:
    """Schedules, their state, their runs, and the claims of due slots."""

    def __init__(self, client: redis.Redis, keys: KeySpace, agents: AgentStore) -> None:
        self.client = client
        self.keys = keys
        self.agents = agents

    def create(self, new: NewSchedule, *, actor: str, now: float | None = None) -> Schedule:
        """Stores a schedule and its first slot; its agent (and pinned version) must exist."""
        now = time.time() if now is None else now
        try:
            self.agents.get(new.agent, new.agent_version)
        except NotFound as exc:
            raise InvalidInput(f"schedule {new.name!r}: {exc}") from None
        schedule = Schedule(**new.model_dump(), created_at=now, created_by=actor)
        first = schedule.next_after(now)
        if first is None:
            raise InvalidInput(f"schedule {new.name!r}: `at` is in the past, it would never fire")
        with storage_errors("creating a schedule"):
            if not self.client.hsetnx(self.keys.schedules(), new.name, schedule.model_dump_json()):
                raise Conflict(f"schedule {new.name!r} already exists")
            with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(self.keys.schedule_state(new.name), self.keys.schedule_queue(new.name))
                pipe.hset(self.keys.schedule_state(new.name), "paused", "0")
                pipe.zadd(self.keys.schedules_due(), {new.name: to_ms(first)})
                pipe.execute()
        return schedule

    def get(self, name: str) -> Schedule:
        with storage_errors("reading a schedule"):
            doc = self.client.hget(self.keys.schedules(), name)
        if doc is None:
            raise NotFound(f"there is no schedule named {name!r}")
        return _parse(doc)

    def get_many(self, names: Sequence[str]) -> dict[str, Schedule | CorruptRecord]:
        """The schedules of `names` that exist, in one round trip; one that does not parse
        is its CorruptRecord."""
        if not names:
            return {}
        with storage_errors("reading schedules"):
            docs: Any = self.client.hmget(self.keys.schedules(), list(names))
        found: dict[str, Schedule | CorruptRecord] = {}
        for name, doc in zip(names, docs, strict=True):
            if doc is not None:
                try:
                    found[name] = _parse(doc)
                except CorruptRecord as exc:
                    found[name] = exc
        return found

    def status(self, name: str, *, now: float | None = None) -> ScheduleStatus:
        return self._status(self.get(name), time.time() if now is None else now)

    def _status(self, schedule: Schedule, now: float) -> ScheduleStatus:
        with (
            storage_errors("reading a schedule's state"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.hgetall(self.keys.schedule_state(schedule.name))
            pipe.zscore(self.keys.schedules_due(), schedule.name)
            pipe.llen(self.keys.schedule_queue(schedule.name))
            state, score, pending = pipe.execute()
        paused = state.get("paused") == "1"
        upcoming: list[float] = []
        if not paused and score is not None:
            later = schedule.next_times((int(score) + 1) / 1000, _SHOWN_NEXT - 1)
            upcoming = [score / 1000, *later]
        outcome = state.get("last_outcome")
        return ScheduleStatus(
            schedule=schedule,
            paused=paused,
            next_fire_times=upcoming,
            conversation_id=state.get("conversation_id") or None,
            runs=int(state.get("runs", 0)),
            skipped=int(state.get("skipped", 0)),
            pending=int(pending),
            last_outcome=RunOutcome(outcome) if outcome else None,
        )

    def pause(self, name: str) -> None:
        """No fire until resumed; slots that pass meanwhile are not missed, just not due."""
        self.get(name)
        with storage_errors("pausing a schedule"), self.client.pipeline(transaction=True) as pipe:
            pipe.hset(self.keys.schedule_state(name), "paused", "1")
            pipe.zrem(self.keys.schedules_due(), name)
            pipe.execute()

    def resume(self, name: str, *, now: float | None = None) -> None:
        """Fires again from the first slot after now."""
        upcoming = self.get(name).next_after(time.time() if now is None else now)
        with storage_errors("resuming a schedule"), self.client.pipeline(transaction=True) as pipe:
            pipe.hset(self.keys.schedule_state(name), "paused", "0")
            if upcoming is not None:
                pipe.zadd(self.keys.schedules_due(), {name: to_ms(upcoming)})
            pipe.execute()

    def delete(self, name: str) -> None:
        """Removes the schedule; its conversations and their history stay."""
        with storage_errors("deleting a schedule"), self.client.pipeline(transaction=True) as pipe:
            pipe.hdel(self.keys.schedules(), name)
            pipe.zrem(self.keys.schedules_due(), name)
            pipe.srem(self.keys.schedules_waiting(), name)
            removed, *_ = pipe.execute()
        if not removed:
            raise NotFound(f"there is no schedule named {name!r}")
        with storage_errors("deleting a schedule"):
            self.client.delete(
                self.keys.schedule_state(name),
                self.keys.schedule_runs(name),
                self.keys.schedule_queue(name),
            )

    # What beat does

    def due(self, now: float, *, limit: int = 500) -> list[tuple[str, int]]:
        """Schedules whose next slot is due, soonest first: (name, due ms)."""
        with storage_errors("reading due schedules"):
            found: Any = self.client.zrangebyscore(
                self.keys.schedules_due(), "-inf", to_ms(now), start=0, num=limit, withscores=True
            )
        return [(str(name), int(score)) for name, score in found]

    def next_due(self) -> float | None:
        """When the soonest slot is due (Unix time); None when nothing is scheduled."""
        with storage_errors("reading due schedules"):
            found: Any = self.client.zrange(self.keys.schedules_due(), 0, 0, withscores=True)
        return found[0][1] / 1000 if found else None

    def claim(
        self, slots: Sequence[tuple[str, int, int | None]], *, now: float | None = None
    ) -> set[str]:
        """Takes each slot (name, due ms, next ms) still due and moves its schedule on to the
        next slot, each atomically, in one round trip; returns the names taken. Each taken
        slot stays claimed until `record` notes its fire (see `stale_claims`)."""
        request = {
            "now": str(to_ms(time.time() if now is None else now)),
            "slots": [
                [
                    name,
                    str(due_ms),
                    "" if next_ms is None else str(next_ms),
                    _claim_member(name, due_ms),
                ]
                for name, due_ms, next_ms in slots
            ],
        }
        if not slots:
            return set()
        keys = [self.keys.schedules_due(), self.keys.schedules_claimed()]
        with storage_errors("claiming schedules' slots"):
            won: Any = _CLAIM(self.client, keys, [json.dumps(request)])
        return {str(name) for name in won}

    def stale_claims(self, now: float, lease_s: float, *, limit: int = 100) -> list[Claim]:
        """Slots claimed more than `lease_s` ago and never fired: their beat died."""
        with storage_errors("reading claimed slots"):
            found: Any = self.client.zrangebyscore(
                self.keys.schedules_claimed(),
                "-inf",
                to_ms(now - lease_s),
                start=0,
                num=limit,
                withscores=True,
            )
        claims = []
        for member, score in found:
            due_ms, _, name = str(member).partition(":")
            claims.append(Claim(name=name, due_ms=int(due_ms), claimed_ms=int(score)))
        return claims

    def reclaim(self, claims: Sequence[Claim], *, now: float | None = None) -> list[Claim]:
        """Takes over stale claims, each once among callers (compare-and-set on the claim
        time read); returns those this caller took, claimed anew as of `now`."""
        if not claims:
            return []
        moment = to_ms(time.time() if now is None else now)
        request = {
            "now": str(moment),
            "claims": [[claim.member, str(claim.claimed_ms)] for claim in claims],
        }
        with storage_errors("reclaiming schedules' slots"):
            won: Any = _RECLAIM(self.client, [self.keys.schedules_claimed()], [json.dumps(request)])
        taken = {str(member) for member in won}
        return [
            Claim(claim.name, claim.due_ms, moment) for claim in claims if claim.member in taken
        ]

    def drop_claim(self, name: str, due_ms: int) -> None:
        """Forgets a claimed slot that will not be fired (its schedule was deleted)."""
        with storage_errors("dropping a claimed slot"):
            self.client.zrem(self.keys.schedules_claimed(), _claim_member(name, due_ms))

    def record(self, name: str, run: ScheduleRun) -> None:
        """Appends a fire to the runs stream and sums it into the schedule's state; the
        `schedule.fired` webhook event goes in the same round trip, and the slot's claim is
        cleared in it: a fire is recorded and unclaimed together, or neither."""
        state = self.keys.schedule_state(name)
        fields: dict[Any, Any] = {"last_outcome": run.outcome.value}
        if run.conversation_id:
            fields["conversation_id"] = run.conversation_id
        with (
            storage_errors("recording a schedule's fire"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.xadd(
                self.keys.schedule_runs(name),
                {"run": run.model_dump_json()},
                maxlen=_RUNS_MAXLEN,
                approximate=True,
            )
            pipe.hset(state, mapping=fields)
            if run.outcome in _SKIPS:
                pipe.hincrby(state, "skipped", 1)
            elif run.outcome not in (RunOutcome.FAILED, RunOutcome.QUEUED):
                pipe.hincrby(state, "runs", 1)
            pipe.zrem(self.keys.schedules_claimed(), _claim_member(name, to_ms(run.due)))
            event = _fired_event(name, run)
            shard = self.keys.shard_for(event.event_id)
            if self.keys.shards == 1:  # in the same transaction
                queue_event(pipe, self.keys, event, shard)
            pipe.execute()
        if self.keys.shards > 1:  # a shard's outbox is in another slot: right after it
            emit_webhook_event(
                self.client, self.keys, event.kind, event.data, event_id=event.event_id
            )

    def runs(self, name: str, *, limit: int = 100) -> list[ScheduleRun]:
        """The latest fires, newest first."""
        with storage_errors("reading a schedule's runs"):
            raw: Any = self.client.xrevrange(self.keys.schedule_runs(name), count=limit)
        return [ScheduleRun.model_validate_json(fields["run"]) for _, fields in raw]

    def queue_run(self, name: str, due_ms: int) -> bool:
        """Keeps a fire waiting behind the running one; False when MAX_QUEUED_RUNS wait."""
        with storage_errors("queueing a schedule's fire"):
            if int(self.client.llen(self.keys.schedule_queue(name))) >= MAX_QUEUED_RUNS:
                return False
            with self.client.pipeline(transaction=True) as pipe:
                pipe.rpush(self.keys.schedule_queue(name), due_ms)
                pipe.sadd(self.keys.schedules_waiting(), name)
                pipe.execute()
        return True

    def waiting(self) -> list[str]:
        """Schedules with fires queued behind a running conversation."""
        with storage_errors("reading waiting schedules"):
            members: Any = self.client.smembers(self.keys.schedules_waiting())
        return sorted(str(n) for n in members)

    def take_queued(self, name: str, after: str, run_prefix: str) -> int | None:
        """The next queued fire, if the run it waited for is still `after` (once among callers).

        Its run's conversation id is `run_prefix` and its due ms.
        """
        keys = [self.keys.schedule_state(name), self.keys.schedule_queue(name)]
        with storage_errors("taking a queued fire"):
            taken = _TAKE_QUEUED(self.client, keys, [after, run_prefix])
            if taken is None and not self.client.exists(self.keys.schedule_queue(name)):
                self.client.srem(self.keys.schedules_waiting(), name)
        return None if taken is None else int(taken)

    def using_agent(self, agent: str) -> list[str]:
        """The names of the schedules that run `agent`, sorted."""
        with storage_errors("listing schedules"):
            raw: dict[str, str] = self.client.hgetall(self.keys.schedules())  # type: ignore[assignment]
        found = []
        for name, doc in raw.items():
            try:
                if _parse(doc).agent == agent:
                    found.append(name)
            except CorruptRecord:
                continue  # an unreadable schedule names no agent we can tell
        return sorted(found)

    def list(self, *, now: float | None = None) -> list[ScheduleStatus]:
        """Every schedule, by name, with its state."""
        with storage_errors("listing schedules"):
            raw: dict[str, str] = self.client.hgetall(self.keys.schedules())  # type: ignore[assignment]
        moment = time.time() if now is None else now
        return [self._status(_parse(doc), moment) for _, doc in sorted(raw.items())]


def _fired_event(name: str, run: ScheduleRun) -> WebhookEvent:
    """What endpoints hear of a fire; one event per slot, however often it is recorded."""
    where = f" in {run.conversation_id}" if run.conversation_id else ""
    return WebhookEvent(
        event_id=f"schedule.fired:{name}:{to_ms(run.due)}",
        kind=WebhookEventKind.SCHEDULE_FIRED,
        data={
            "schedule": name,
            **run.model_dump(mode="json"),
            "text": f"Schedule {name} fired: {run.outcome.value}{where}",
        },
    )


def _parse(doc: Any) -> Schedule:
    try:
        return Schedule.model_validate_json(doc)
    except ValidationError as exc:
        raise CorruptRecord(f"a schedule does not parse: {exc}") from exc
