"""A schedule every 2 s, two `signoff beat` processes, a real worker: each slot fires once."""

from __future__ import annotations

import itertools
import time

from shared.client import Client
from shared.models.agents import NewAgent
from shared.models.events import ConversationStatus
from shared.models.schedules import NewSchedule, RunOutcome
from tests.integration.test_expiry import BeatProcess
from tests.stack import WorkerProcess
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
    started = client.redis.zrangebyscore(client.keys.conversations(), "-inf", "+inf")
    assert sorted(c for c in started if str(c).startswith("sched.every2.")) == sorted(
        run.conversation_id for run in runs if run.conversation_id
    )
