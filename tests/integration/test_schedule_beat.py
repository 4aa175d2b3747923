"""A schedule every 2 s, two `signoff beat` processes, a real worker: each slot fires once;
slots a killed beat had claimed and not fired are fired once by another beat."""

from __future__ import annotations

import itertools
import os
import re
import signal
import time
import uuid
from datetime import UTC, datetime

from shared.client import Client
from shared.models.agents import NewAgent
from shared.models.events import ConversationStatus
from shared.models.schedules import NewSchedule, RunOutcome
from shared.settings import Settings
from tests.integration.test_expiry import BeatProcess
from tests.stack import WorkerProcess, freeze, members
from tests.web.conftest import wait_for

SLOTS = 4


def test_two_beats_fire_each_slot_exactly_once(
    stack_env: dict[str, str], worker: WorkerProcess, client: Client
) -> None:
    stores = client.stores
    stores.agents.create(NewAgent(name="ticker", system_prompt="Be brief."), actor="test")
    env = {**stack_env, "SIGNOFF_SCHEDULE_POLL_S": "0.2"}
    beats = [BeatProcess(env).start(), BeatProcess(env).start()]
    try:
        stores.schedules.create(
            NewSchedule(name="every2", agent="ticker", prompt="tick", cron="*/2 * * * * *"),
            actor="test",
        )
        wait_for(
            lambda: len(stores.schedules.runs("every2")) >= SLOTS,
            f"{SLOTS} fires of the 2 s schedule",
            timeout_s=SLOTS * 2 + 6,
        )
        stores.schedules.pause("every2")
        time.sleep(0.3)  # a fire claimed just before the pause is recorded
    finally:
        for beat in beats:
            beat.stop()
    logs = "\n".join(beat.log() for beat in beats)
    runs = sorted(stores.schedules.runs("every2"), key=lambda run: run.due)
    dues = [run.due for run in runs]
    assert len(dues) == len(set(dues)), f"a slot fired twice: {dues}\n{logs[-3000:]}"
    assert all(later - earlier == 2 for earlier, later in itertools.pairwise(dues))
    assert all(run.outcome is RunOutcome.STARTED for run in runs), runs
    assert "every2 fired" in beats[0].log() or "every2 fired" in beats[1].log()
    for run in runs:
        assert 0 <= run.fired_at - run.due < 1.5, run  # on time, not a missed slot
        assert run.conversation_id is not None
        conversation = client.conversation(run.conversation_id)
        wait_for(
            lambda c=conversation: c.status is ConversationStatus.IDLE and c.turn_count == 1,
            "the run's turn to complete",
        )
        record = stores.conversations.get(run.conversation_id)
        assert (record.config.agent, record.config.agent_version) == ("ticker", 1)
        assert record.config.system_prompt == "Be brief."
    # exactly one conversation per fire: the slot names it, so a second fire could not hide
    started = members(client, client.keys.conversations)
    assert sorted(c for c in started if str(c).startswith("sched.every2.")) == sorted(
        run.conversation_id for run in runs if run.conversation_id
    )


ORPHANS = 64  # schedules due at one moment: a beat fires them in claims of 16


def _kill_between_claim_and_fire(beat: BeatProcess, client: Client, deadline_s: float) -> int:
    """SIGKILLs the beat at a moment it holds claimed slots it has not fired; their count.

    The beat is frozen (SIGSTOP) first, so the claims seen are the ones it dies with.
    """
    assert beat.process is not None
    claimed = client.keys.schedules_claimed()
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if client.redis.zcard(claimed):
            freeze(beat.process.pid)
            held = int(client.redis.zcard(claimed))
            if held:
                beat.process.send_signal(signal.SIGKILL)
                beat.process.wait()
                beat.process = None
                return held
            os.kill(beat.process.pid, signal.SIGCONT)
        time.sleep(0.001)
    raise AssertionError(f"the beat never held an unfired claim:\n{beat.log()[-3000:]}")


def test_slots_claimed_by_a_killed_beat_are_fired_once_by_another(
    stack_env: dict[str, str],
) -> None:
    # Its own key prefix: no worker reads its queue, so the runs' turns cost nothing here.
    env = {
        **stack_env,
        "SIGNOFF_KEY_PREFIX": f"sk{uuid.uuid4().hex[:8]}",
        "SIGNOFF_SCHEDULE_POLL_S": "0.2",
        "SIGNOFF_SCHEDULE_CLAIM_LEASE_S": "2",
    }
    settings = Settings(redis_url=env["SIGNOFF_REDIS_URL"], key_prefix=env["SIGNOFF_KEY_PREFIX"])
    with Client(settings) as client:
        stores = client.stores
        stores.agents.create(NewAgent(name="once"), actor="test")
        first = BeatProcess(env).start()
        second = BeatProcess(env)
        try:
            at = datetime.fromtimestamp(time.time() + 4, UTC)  # after all are made
            names = [f"o{i}" for i in range(ORPHANS)]
            for name in names:
                spec = NewSchedule(name=name, agent="once", prompt="go", at=at)
                stores.schedules.create(spec, actor="test")
            orphaned = _kill_between_claim_and_fire(first, client, deadline_s=30)
            killed_at = time.time()
            second.start()
            wait_for(
                lambda: all(stores.schedules.runs(name) for name in names),
                "every slot to be fired",
                timeout_s=30,
            )
            time.sleep(0.5)  # a second fire of any slot, if there were one, is recorded
        finally:
            first.stop()
            second.stop()
        runs = {name: stores.schedules.runs(name) for name in names}
        assert all(len(found) == 1 for found in runs.values()), runs
        recovered = set(
            re.findall(r"schedule (\S+): slot \d+ was claimed, never fired", second.log())
        )
        assert len(recovered) == orphaned, (orphaned, second.log()[-3000:])
        for name in recovered:
            [run] = runs[name]
            assert run.outcome is RunOutcome.STARTED and run.fired_at >= killed_at, run
        assert client.redis.zcard(client.keys.schedules_claimed()) == 0
