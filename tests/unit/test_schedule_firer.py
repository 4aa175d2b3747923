"""Schedules on a fake clock against real Redis: slots, claims, overlap and missed policies.

No worker runs here, so a run's turn stays queued: its conversation counts as still
running, which is what the overlap policies are about.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from pydantic import ValidationError

from shared.client.task_message import QueuedTask
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.agents import NewAgent
from shared.models.config import ConversationConfig
from shared.models.content import Content
from shared.models.schedules import NewSchedule, RunOutcome, Schedule
from shared.models.webhooks import EndpointRequest, WebhookEvent
from shared.settings import DoubleTextPolicy, Settings
from shared.store.bundle import Stores
from shared.store.webhooks import EndpointStore
from worker.schedules.firer import CLAIM_BATCH, ScheduleFirer
from worker.schedules.runs import ScheduleRunner, run_conversation_id

T0 = 1_000_000.0


@pytest.fixture
def stores(redis_server: EmbeddedRedis) -> Iterator[Stores]:
    settings = Settings(redis_url=redis_server.url, key_prefix=f"sf{uuid.uuid4().hex[:8]}")
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    built = Stores.build(client, settings, None)
    built.agents.create(NewAgent(name="bot", system_prompt="hi"), actor="test")
    yield built
    client.close()


@pytest.fixture
def sent() -> list[str]:
    return []


@pytest.fixture
def firer(stores: Stores, sent: list[str]) -> ScheduleFirer:
    return ScheduleFirer(ScheduleRunner(stores, sent.append))


def _every(stores: Stores, name: str, **options: object) -> None:
    spec = {"name": name, "agent": "bot", "prompt": "go", "every_s": 10.0, **options}
    stores.schedules.create(NewSchedule.model_validate(spec), actor="test", now=T0)


def _outcomes(stores: Stores, name: str) -> list[RunOutcome]:
    return [run.outcome for run in reversed(stores.schedules.runs(name))]


def test_each_slot_is_claimed_once_among_beats(stores: Stores, sent: list[str]) -> None:
    _every(stores, "s")
    one, two = (ScheduleFirer(ScheduleRunner(stores, sent.append)) for _ in range(2))
    assert one.tick(now=T0 + 9.9) == 0
    assert one.tick(now=T0 + 10.01) + two.tick(now=T0 + 10.01) == 1
    assert two.tick(now=T0 + 10.02) == 0
    [run] = stores.schedules.runs("s")
    assert (run.outcome, run.due, run.agent_version) == (RunOutcome.STARTED, T0 + 10, 1)
    assert run.conversation_id == f"sched.s.{int((T0 + 10) * 1000)}"
    assert sent == [run.conversation_id]
    config = stores.conversations.get(run.conversation_id).config
    assert (config.agent, config.agent_version, config.system_prompt) == ("bot", 1, "hi")
    status = stores.schedules.status("s", now=T0 + 10.01)
    assert status.next_fire_times[:2] == [T0 + 20, T0 + 30]
    assert (status.runs, status.conversation_id) == (1, run.conversation_id)


def test_a_fire_is_a_schedule_fired_webhook_event(stores: Stores, firer: ScheduleFirer) -> None:
    wanted = EndpointRequest(url="http://127.0.0.1:9/hook", events=["schedule.fired"])
    EndpointStore(stores.redis, stores.keys).add(wanted, actor="test")
    _every(stores, "w")
    firer.tick(now=T0 + 10.01)
    [(_, fields)] = stores.redis.xrange(stores.keys.webhook_outbox(0))
    event = WebhookEvent.model_validate_json(fields["event"])
    assert (event.kind, event.event_id) == (
        "schedule.fired",
        f"schedule.fired:w:{int((T0 + 10) * 1000)}",
    )
    assert event.data["outcome"] == "started" and event.data["schedule"] == "w"
    assert event.data["text"].startswith("Schedule w fired: started in sched.w.")


def test_overlap_skip_cancel_and_queue(stores: Stores, firer: ScheduleFirer) -> None:
    for policy in ("skip", "cancel", "queue"):
        _every(stores, policy, overlap=policy)
    firer.tick(now=T0 + 10.01)
    firer.tick(now=T0 + 20.01)  # every first run still has its turn queued: it still runs
    assert _outcomes(stores, "skip") == [RunOutcome.STARTED, RunOutcome.SKIPPED]
    assert _outcomes(stores, "cancel") == [RunOutcome.STARTED, RunOutcome.CANCELLED_RUNNING]
    cancelled = stores.schedules.runs("cancel")[-1].conversation_id
    assert cancelled is not None and stores.conversations.get(cancelled).queued == 0
    assert _outcomes(stores, "queue") == [RunOutcome.STARTED, RunOutcome.QUEUED]
    assert stores.schedules.status("queue").pending == 1
    firer.tick(now=T0 + 20.5)
    assert stores.schedules.status("queue").pending == 1  # its first run still runs
    first = stores.schedules.status("queue").conversation_id
    assert first is not None
    stores.conversations.abort(first)  # the first run ends
    firer.tick(now=T0 + 21)
    runs = stores.schedules.runs("queue")
    assert (runs[0].outcome, runs[0].detail) == (RunOutcome.STARTED, "waited for the previous run")
    assert runs[0].due == T0 + 20 and stores.schedules.status("queue").pending == 0


def test_continue_keeps_one_conversation(stores: Stores, firer: ScheduleFirer) -> None:
    _every(stores, "long", conversation="continue", overlap="queue")
    firer.tick(now=T0 + 10.01)
    firer.tick(now=T0 + 20.01)
    runs = stores.schedules.runs("long")
    assert [run.outcome for run in runs] == [RunOutcome.SENT, RunOutcome.SENT]
    assert runs[0].conversation_id == runs[1].conversation_id
    assert stores.conversations.get(str(runs[0].conversation_id)).queued == 2


@pytest.mark.parametrize(("policy", "outcome"), [("skip", "missed"), ("run_once", "started")])
def test_a_slot_missed_while_beat_was_down(
    stores: Stores, firer: ScheduleFirer, policy: str, outcome: str
) -> None:
    _every(stores, "m", missed=policy)
    assert firer.tick(now=T0 + 95) == 1  # eight slots passed: one fire, or none
    [run] = stores.schedules.runs("m")
    assert run.outcome is RunOutcome(outcome) and run.detail.startswith("missed: due ")
    assert stores.schedules.status("m", now=T0 + 95).next_fire_times[0] == T0 + 100
    assert firer.tick(now=T0 + 96) == 0


@pytest.mark.parametrize(
    ("every_s", "policy", "outcome"),
    [(10.0, "run_once", "started"), (10.0, "skip", "missed"), (600.0, "skip", "started")],
)
def test_a_slot_claimed_by_a_beat_that_died_is_handled_once_after_the_lease(
    stores: Stores, sent: list[str], every_s: float, policy: str, outcome: str
) -> None:
    _every(stores, "c", every_s=every_s, missed=policy)
    due_ms = int((T0 + every_s) * 1000)
    # what a beat does before it dies: claims the slot, fires nothing
    assert stores.schedules.claim([("c", due_ms, due_ms + 10**9)], now=T0 + every_s) == {"c"}
    lease = stores.settings.schedule_claim_lease_s
    one, two = (ScheduleFirer(ScheduleRunner(stores, sent.append)) for _ in range(2))
    assert one.tick(now=T0 + every_s + lease - 1) == 0  # the claimer may still be firing it
    late = T0 + every_s + lease + 1
    assert one.tick(now=late) + two.tick(now=late) == 1
    assert one.tick(now=late + 1) + two.tick(now=late + 1) == 0
    [run] = stores.schedules.runs("c")
    assert (run.outcome, run.due) == (RunOutcome(outcome), T0 + every_s)
    assert stores.schedules.stale_claims(late + 3600, lease) == []
    assert len(sent) == (outcome == "started")


def test_claims_of_fired_deleted_and_unreadable_schedules_are_not_left_behind(
    stores: Stores, firer: ScheduleFirer
) -> None:
    _every(stores, "f")
    _every(stores, "gone")
    assert firer.tick(now=T0 + 10.01) == 2
    lease = stores.settings.schedule_claim_lease_s
    assert stores.schedules.stale_claims(T0 + 10 + lease + 1, lease) == []
    due_ms = int((T0 + 20) * 1000)
    assert stores.schedules.claim([("gone", due_ms, None)], now=T0 + 20) == {"gone"}
    stores.schedules.delete("gone")
    assert firer.tick(now=T0 + 20 + lease + 1) >= 1  # the claim taken over, then dropped
    assert stores.schedules.stale_claims(T0 + 9999, lease) == []
    assert len(stores.schedules.runs("gone")) == 0
    _every(stores, "broken")
    stores.redis.hset(stores.keys.schedules(), "broken", "{not json")
    assert firer.tick(now=T0 + 10.01) == 0  # an unreadable schedule leaves the due set
    assert stores.schedules.stale_claims(T0 + 9999, lease) == []  # and holds no claim
    assert [name for name, _ in stores.schedules.due(T0 + 9999)] == ["f"]


@pytest.mark.parametrize("prompted", [False, True])
def test_a_taken_over_slot_adopts_the_conversation_its_dead_beat_made(
    stores: Stores, sent: list[str], prompted: bool
) -> None:
    """The dead beat got as far as the run's conversation (and maybe its prompt): the slot
    runs once, in that conversation, with one prompt."""
    _every(stores, "a", every_s=600.0)
    schedule = stores.schedules.get("a")
    due_ms = int((T0 + 600) * 1000)
    assert stores.schedules.claim([("a", due_ms, due_ms + 10**9)], now=T0 + 600) == {"a"}
    cid = run_conversation_id(schedule, due_ms)
    stores.conversations.create(ConversationConfig(), conversation_id=cid, owner="schedule:a")
    if prompted:
        stores.conversations.submit(cid, Content.from_text("go"), DoubleTextPolicy.ENQUEUE)
    firer = ScheduleFirer(ScheduleRunner(stores, sent.append))
    lease = stores.settings.schedule_claim_lease_s
    assert firer.tick(now=T0 + 600 + lease + 1) == 1
    [run] = stores.schedules.runs("a")
    assert (run.outcome, run.conversation_id) == (RunOutcome.STARTED, cid)
    assert "made by a beat that stopped" in run.detail
    assert stores.conversations.get(cid).queued == 1  # one prompt, whoever sent it
    assert sent == [cid]  # its advance, in case the dead beat had not sent it


def test_a_claim_is_stamped_when_it_is_made_not_when_a_long_tick_began(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(CLAIM_BATCH + 1):
        _every(stores, f"slow{i}")
    firer = ScheduleFirer(ScheduleRunner(stores, lambda _cid: time.sleep(0.02)))
    stamps: list[float | None] = []
    claim = stores.schedules.claim

    def stamped(slots: Any, *, now: float | None = None) -> set[str]:
        stamps.append(now)
        return claim(slots, now=now)

    monkeypatch.setattr(stores.schedules, "claim", stamped)
    assert firer.tick(now=T0 + 10.01) == CLAIM_BATCH + 1
    first, second = stamps
    assert first is not None and second is not None
    assert second - first >= CLAIM_BATCH * 0.02  # the first batch's fires took that long


@pytest.mark.parametrize("timing", [{"at": T0 + 10.0004}, {"every_s": 10.0}])
def test_a_slot_a_hair_after_its_stored_ms_fires_once_on_time(
    stores: Stores, firer: ScheduleFirer, timing: dict[str, float]
) -> None:
    """Slots are stored in whole ms: 10.0004 s is kept as 10.000, so a beat can wake before
    the slot's true time; it must not find the same slot again as the next one."""
    spec: dict[str, object] = {"name": "hair", "agent": "bot", "prompt": "go", "missed": "skip"}
    if "at" in timing:
        spec["at"] = datetime.fromtimestamp(timing["at"], UTC)
        created = T0
    else:
        spec["every_s"] = timing["every_s"]
        created = T0 + 0.0004  # the slots are 10.0004 s, 20.0004 s... after T0
    stores.schedules.create(NewSchedule.model_validate(spec), actor="test", now=created)
    assert firer.tick(now=T0 + 10.0002) == 1
    [run] = stores.schedules.runs("hair")
    assert run.outcome is RunOutcome.STARTED and run.detail == "", run
    assert firer.tick(now=T0 + 10.01) == 0
    upcoming = stores.schedules.status("hair", now=T0 + 10.01).next_fire_times
    assert upcoming == (
        [] if "at" in timing else [pytest.approx(T0 + 20.0004 + k * 10) for k in range(5)]
    )


def test_pause_resume_delete_and_a_vanished_agent(stores: Stores, firer: ScheduleFirer) -> None:
    _every(stores, "p")
    stores.schedules.pause("p")
    assert stores.schedules.status("p").paused and firer.tick(now=T0 + 40) == 0
    stores.schedules.resume("p", now=T0 + 41)
    assert stores.schedules.status("p", now=T0 + 41).next_fire_times[0] == T0 + 50
    stores.agents.delete("bot")
    firer.tick(now=T0 + 50.01)
    [run] = stores.schedules.runs("p")
    assert run.outcome is RunOutcome.FAILED and "no agent named 'bot'" in run.detail
    stores.schedules.delete("p")
    assert stores.schedules.list() == [] and firer.tick(now=T0 + 60.01) == 0


def test_fire_times_of_cron_in_a_time_zone_and_once() -> None:
    base = {"name": "c", "agent": "bot", "prompt": "go", "created_at": T0, "created_by": "t"}
    paris = Schedule.model_validate({**base, "cron": "0 9 * * *", "timezone": "Europe/Paris"})
    winter = datetime(2030, 1, 10, 12, tzinfo=UTC).timestamp()
    assert paris.next_after(winter) == datetime(2030, 1, 11, 8, tzinfo=UTC).timestamp()
    summer = datetime(2030, 7, 10, 12, tzinfo=UTC).timestamp()
    assert paris.next_after(summer) == datetime(2030, 7, 11, 7, tzinfo=UTC).timestamp()
    seconds = Schedule.model_validate({**base, "cron": "*/2 * * * * *"})
    assert seconds.next_times(T0 + 0.5, 3) == [T0 + 2, T0 + 4, T0 + 6]
    once = Schedule.model_validate({**base, "at": "2030-01-01T09:00:00+01:00"})
    at = datetime(2030, 1, 1, 8, tzinfo=UTC).timestamp()
    assert once.next_times(T0, 3) == [at] and once.next_after(at) is None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"cron": "61 * * * *"}, "bad cron expression '61 * * * *'"),
        ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"cron": "0 9 * * *", "every_s": 60}, "exactly one of cron, every_s or at"),
        ({}, "exactly one of cron, every_s or at"),
        ({"every_s": 0.5}, "greater than or equal to 1"),
        ({"at": "2030-01-01T09:00:00"}, "timezone"),
    ],
)
def test_bad_schedules_are_refused_naming_the_problem(
    fields: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(problem)):
        NewSchedule.model_validate({"name": "x", "agent": "bot", "prompt": "go", **fields})


def test_a_fire_queues_its_advance_in_the_submit_write(stores: Stores, sent: list[str]) -> None:
    _every(stores, "q")
    queue = f"{stores.keys.prefix}:test-queue"
    runner = ScheduleRunner(stores, sent.append, lambda cid: QueuedTask(queue, f"advance {cid}"))
    assert ScheduleFirer(runner).tick(now=T0 + 10.01) == 1
    [run] = stores.schedules.runs("q")
    assert run.outcome is RunOutcome.STARTED and run.conversation_id is not None
    assert stores.redis.lrange(queue, 0, -1) == [f"advance {run.conversation_id}"]
    assert sent == []
    assert stores.redis.llen(stores.keys.inbox(run.conversation_id)) == 1
