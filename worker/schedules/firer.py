"""The loop in `signoff beat` that fires schedules: claim each due slot, then run it.

It sleeps until the soonest slot is due (at most `schedule_poll_s`, to notice new
schedules), so a fire is late by the time a claim and a run take, not by a polling
period. Any number of beat processes may run it: a slot is run by whichever claims it
(`ScheduleStore.claim`). A slot found more than `schedule_misfire_s` late, or with later
slots already due too, was missed while no beat ran: it is run once or skipped, by the
schedule's `missed` policy, and the schedule goes on from the first slot after now.
Claims go up to CLAIM_BATCH to a round trip, and each claim stays recorded until its fire
is: a slot claimed by a beat that died before firing it is taken over, once among beats,
after `schedule_claim_lease_s`, and fired then (or skipped, if by then it counts as missed).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from datetime import UTC, datetime

from shared.errors import CorruptRecord, NotFound, SignoffError
from shared.metrics.series import SCHEDULE_FIRE_LAG
from shared.models.schedules import Missed, Schedule
from shared.store.schedules import to_ms
from worker.schedules.runs import ScheduleRunner, run_prefix

__all__ = ["CLAIM_BATCH", "ScheduleFirer"]

log = logging.getLogger(__name__)

CLAIM_BATCH = 16  # slots claimed in one round trip; a killed beat's are reclaimed later


class ScheduleFirer:
    """Claims and runs due slots; `start` runs it on a thread until `stop`."""

    def __init__(self, runner: ScheduleRunner) -> None:
        self.runner = runner
        self.store = runner.stores.schedules
        self.settings = runner.stores.settings
        self._random = secrets.SystemRandom()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._tick_started = (0.0, 0.0)  # the tick's `now`, and the monotonic clock then

    def tick(self, now: float | None = None) -> int:
        """Handles every slot due at `now` and every queued fire now free; returns the count."""
        now = time.time() if now is None else now
        self._tick_started = (now, time.monotonic())
        self.runner.forget_agents()  # agents as of this tick: read once, not once per fire
        due = self.store.due(now)
        # Beats racing for one slot's fires take them in different orders, so they mostly
        # claim different ones instead of trying the same ones in turn.
        self._random.shuffle(due)
        due.sort(key=lambda slot: slot[1] // 1000)
        schedules = self.store.get_many([name for name, _ in due])
        handled = 0
        for start in range(0, len(due), CLAIM_BATCH):
            handled += self._claim_and_fire(due[start : start + CLAIM_BATCH], schedules, now)
        handled += self._recover(now)
        for name in self.store.waiting():
            handled += self._release(name)
        return handled

    def _clock(self) -> float:
        """The tick's time moved on by the time the tick has taken: a claim records when it
        was made, not when a long tick began, or another beat would take it too early."""
        began, mark = self._tick_started
        return began + (time.monotonic() - mark)

    def _recover(self, now: float) -> int:
        """Fires the slots that a beat claimed and died before firing."""
        stale = self.store.stale_claims(now, self.settings.schedule_claim_lease_s)
        taken = self.store.reclaim(stale, now=self._clock())
        schedules = self.store.get_many([claim.name for claim in taken])
        for claim in taken:
            schedule = schedules.get(claim.name)
            if isinstance(schedule, Schedule):
                log.warning(
                    "schedule %s: slot %d was claimed, never fired", claim.name, claim.due_ms
                )
                self._slot(schedule, claim.due_ms, now)
            else:  # deleted or unreadable since: nothing to fire
                self.store.drop_claim(claim.name, claim.due_ms)
        return len(taken)

    def _claim_and_fire(
        self,
        due: list[tuple[str, int]],
        schedules: dict[str, Schedule | CorruptRecord],
        now: float,
    ) -> int:
        """Claims a batch of slots in one round trip, then runs those this beat took."""
        slots: list[tuple[str, int, int | None]] = []
        for name, due_ms in due:
            schedule = schedules.get(name)
            upcoming = None  # a deleted or unreadable schedule leaves the due set
            if isinstance(schedule, CorruptRecord):
                log.error("schedule %s dropped from the due set: %s", name, schedule)
            elif schedule is not None:
                upcoming = schedule.after_slot(due_ms, now)
            slots.append((name, due_ms, None if upcoming is None else to_ms(upcoming)))
        won = self.store.claim(slots, now=self._clock())
        handled = 0
        for name, due_ms in due:
            schedule = schedules.get(name)
            if name not in won:
                continue
            if isinstance(schedule, Schedule):
                self._slot(schedule, due_ms, now)
                handled += 1
            else:  # it left the due set: nothing to fire
                self.store.drop_claim(name, due_ms)
        return handled

    def _slot(self, schedule: Schedule, due_ms: int, now: float) -> None:
        """Runs a slot this beat claimed: on time, or missed (run once or skipped)."""
        name = schedule.name
        missed = self._missed(schedule, due_ms, now)
        skipped = bool(missed) and schedule.missed is Missed.SKIP
        SCHEDULE_FIRE_LAG.labels("skipped" if skipped else "fired").observe(
            max(time.time() - due_ms / 1000, 0.0)
        )
        if skipped:
            self.runner.miss(schedule, due_ms, missed)
        else:
            run = self.runner.fire(schedule, due_ms, detail=missed and f"{missed}; run once")
            log.info("schedule %s fired: %s %s", name, run.outcome.value, run.detail)

    def _missed(self, schedule: Schedule, due_ms: int, now: float) -> str:
        """Why this slot counts as missed, or "" when it is on time."""
        due = due_ms / 1000
        later = schedule.after_slot(due_ms)
        if now - due > self.settings.schedule_misfire_s or (later is not None and later <= now):
            when = datetime.fromtimestamp(due, UTC).isoformat(timespec="seconds")
            return f"missed: due {when}, handled {now - due:.0f} s late"
        return ""

    def _release(self, name: str) -> int:
        """Starts the next queued fire of `name` once its previous run has ended."""
        try:
            schedule = self.store.get(name)
        except NotFound:
            return 0
        previous = self.store.status(name).conversation_id or ""
        try:
            if previous and self.runner.is_running(previous):
                return 0
        except NotFound:
            pass  # the previous run's conversation is gone: nothing to wait for
        due_ms = self.store.take_queued(name, previous, run_prefix(name))
        if due_ms is None:
            return 0
        self.runner.start_queued(schedule, due_ms)
        return 1

    def run(self) -> None:
        """Ticks until `stop`: waits for the soonest slot, at most `schedule_poll_s`."""
        poll = self.settings.schedule_poll_s
        while not self._stopping.is_set():
            try:
                self.tick()
                soonest = self.store.next_due()
            except SignoffError as exc:  # Redis away: try again after one poll
                log.warning("firing schedules failed, retried in %.1f s: %s", poll, exc)
                soonest = None
            except Exception:  # a dead thread would fire nothing again: log, go on
                log.exception("firing schedules failed unexpectedly, retried in %.1f s", poll)
                soonest = None
            wait = poll if soonest is None else min(poll, max(0.0, soonest - time.time()))
            self._stopping.wait(wait)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="schedule-firer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
