"""One fire of a schedule: its agent's prompt, into the right conversation, by its overlap policy.

A run of a `new` schedule is a conversation whose id is the schedule's name and the slot's
due time, so a slot can never start two runs even if it were handed out twice: a beat that
takes over a dead beat's claim finds the conversation, and sends its prompt only if that
beat had not. A `continue` schedule keeps one conversation (named after the schedule and
its creation) whose configuration is the agent's version at the first fire. A run counts as still
running while its conversation has a turn active (parked for an approval included) or
queued.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from shared.client.task_message import QueuedTask
from shared.errors import Conflict, NotFound, SignoffError
from shared.models.agents import Agent
from shared.models.owners import InternalOwner, internal_owner
from shared.models.schedules import Overlap, RunMode, RunOutcome, Schedule, ScheduleRun
from shared.settings import DoubleTextPolicy
from shared.store.agents import agent_options
from shared.store.bundle import Stores
from shared.store.schedules import to_ms
from shared.validation import validate_prompt

__all__ = ["ScheduleRunner", "run_conversation_id", "run_prefix"]

_ADOPTED = "its conversation was made by a beat that stopped before recording the fire"


def run_prefix(name: str) -> str:
    """What the conversation ids of a schedule's runs start with."""
    return f"sched.{name}."


def run_conversation_id(schedule: Schedule, due_ms: int) -> str:
    """The conversation a fire writes to: one per slot, or the schedule's long-lived one."""
    if schedule.conversation is RunMode.CONTINUE:
        return f"{run_prefix(schedule.name)}{to_ms(schedule.created_at)}"
    return f"{run_prefix(schedule.name)}{due_ms}"


@dataclass
class ScheduleRunner:
    """Turns a claimed slot into a queued prompt, and records what it did."""

    stores: Stores
    send_advance: Callable[[str], None]
    # builds `advance` for the submit script to push with the prompt (one write); without
    # it the prompt is queued and `advance` sent after it
    queue_advance: Callable[[str], QueuedTask] | None = None
    _agents: dict[tuple[str, int | None], Agent] = field(default_factory=dict)

    def forget_agents(self) -> None:
        """Agents are read again from now on (the firer calls it at each tick)."""
        self._agents.clear()

    def _agent(self, schedule: Schedule) -> Agent:
        wanted = (schedule.agent, schedule.agent_version)
        if wanted not in self._agents:
            self._agents[wanted] = self.stores.agents.get(*wanted)
        return self._agents[wanted]

    def fire(self, schedule: Schedule, due_ms: int, *, detail: str = "") -> ScheduleRun:
        """Runs the slot (the caller claimed it) and records the outcome."""
        try:
            run = self._fire(schedule, due_ms)
        except SignoffError as exc:
            run = self._run(due_ms, RunOutcome.FAILED, detail=str(exc))
        if detail:
            run = run.model_copy(update={"detail": "; ".join(filter(None, [detail, run.detail]))})
        self.stores.schedules.record(schedule.name, run)
        return run

    def miss(self, schedule: Schedule, due_ms: int, detail: str) -> ScheduleRun:
        """Records a slot skipped because it was missed."""
        run = self._run(due_ms, RunOutcome.MISSED, detail=detail)
        self.stores.schedules.record(schedule.name, run)
        return run

    def start_queued(self, schedule: Schedule, due_ms: int) -> ScheduleRun:
        """Starts a fire that waited for the previous run (the caller took it from the queue)."""
        try:
            run = self._start(schedule, due_ms, RunOutcome.STARTED)
        except SignoffError as exc:
            run = self._run(due_ms, RunOutcome.FAILED, detail=str(exc))
        run = run.model_copy(update={"detail": "waited for the previous run"})
        self.stores.schedules.record(schedule.name, run)
        return run

    def _fire(self, schedule: Schedule, due_ms: int) -> ScheduleRun:
        agent = self._agent(schedule)
        if schedule.conversation is RunMode.CONTINUE:
            return self._continue(schedule, agent, due_ms)
        previous = self.stores.schedules.status(schedule.name).conversation_id
        outcome = RunOutcome.STARTED
        if previous is not None and self.is_running(previous):
            if schedule.overlap is Overlap.SKIP:
                return self._run(due_ms, RunOutcome.SKIPPED, detail=f"{previous} still runs")
            if schedule.overlap is Overlap.QUEUE:
                if self.stores.schedules.queue_run(schedule.name, due_ms):
                    return self._run(due_ms, RunOutcome.QUEUED, detail=f"after {previous}")
                return self._run(due_ms, RunOutcome.SKIPPED, detail="too many fires queued")
            self.stores.conversations.abort(previous)
            outcome = RunOutcome.CANCELLED_RUNNING
        return self._start(schedule, due_ms, outcome, agent)

    def _start(
        self, schedule: Schedule, due_ms: int, outcome: RunOutcome, agent: Agent | None = None
    ) -> ScheduleRun:
        """A new conversation for the slot, its prompt queued."""
        agent = agent or self._agent(schedule)
        cid = run_conversation_id(schedule, due_ms)
        if not self._create(schedule, agent, cid):
            return self._adopt(schedule, due_ms, outcome, agent, cid)
        turn = self._send(cid, schedule, DoubleTextPolicy.ENQUEUE)
        return self._run(due_ms, outcome, cid=cid, turn=turn, agent=agent)

    def _adopt(
        self, schedule: Schedule, due_ms: int, outcome: RunOutcome, agent: Agent, cid: str
    ) -> ScheduleRun:
        """The slot's conversation exists: a beat made it and stopped before recording the
        fire (its claim was taken over). Its prompt is sent only if it never was; the advance
        task is sent either way, in case that beat died before sending it."""
        record = self.stores.conversations.get(cid)
        if record.active_turn or record.queued or record.last_turn_status is not None:
            self.send_advance(cid)  # harmless if it was sent: a second advance finds it leased
            return self._run(due_ms, outcome, cid=cid, agent=agent, detail=_ADOPTED)
        turn = self._send(cid, schedule, DoubleTextPolicy.ENQUEUE)
        return self._run(due_ms, outcome, cid=cid, turn=turn, agent=agent, detail=_ADOPTED)

    def _continue(self, schedule: Schedule, agent: Agent, due_ms: int) -> ScheduleRun:
        cid = run_conversation_id(schedule, due_ms)
        try:
            running = self.is_running(cid)
        except NotFound:
            self._create(schedule, agent, cid)
            running = False
        policy = DoubleTextPolicy.ENQUEUE
        outcome = RunOutcome.SENT
        if running and schedule.overlap is Overlap.SKIP:
            return self._run(due_ms, RunOutcome.SKIPPED, cid=cid, detail="the last turn still runs")
        if running and schedule.overlap is Overlap.CANCEL:
            policy, outcome = DoubleTextPolicy.INTERRUPT, RunOutcome.CANCELLED_RUNNING
        turn = self._send(cid, schedule, policy)
        return self._run(due_ms, outcome, cid=cid, turn=turn, agent=agent)

    def is_running(self, cid: str) -> bool:
        """Whether the conversation has a turn active (or parked) or queued."""
        record = self.stores.conversations.get(cid)
        return bool(record.active_turn) or record.queued > 0

    def _create(self, schedule: Schedule, agent: Agent, cid: str) -> bool:
        """Creates the run's conversation; False when it already exists."""
        config = agent_options(agent).resolve(self.stores.settings, policy_may_loosen=False)
        try:
            self.stores.conversations.create(
                config,
                conversation_id=cid,
                owner=internal_owner(InternalOwner.SCHEDULE, schedule.name),
            )
        except Conflict:
            return False
        return True

    def _send(self, cid: str, schedule: Schedule, policy: DoubleTextPolicy) -> str:
        prompt = validate_prompt(schedule.prompt, self.stores.settings)
        advance = self.queue_advance(cid) if self.queue_advance is not None else None
        submission = self.stores.conversations.submit(cid, prompt, policy, advance=advance)
        if advance is None:
            self.send_advance(cid)
        return submission.turn_id

    @staticmethod
    def _run(
        due_ms: int,
        outcome: RunOutcome,
        *,
        cid: str | None = None,
        turn: str | None = None,
        agent: Agent | None = None,
        detail: str = "",
    ) -> ScheduleRun:
        return ScheduleRun(
            due=due_ms / 1000,
            fired_at=time.time(),
            outcome=outcome,
            conversation_id=cid,
            turn_id=turn,
            agent_version=agent.version if agent is not None else None,
            detail=detail,
        )
