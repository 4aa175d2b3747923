"""Schedules: run a named agent on a cron expression, an interval, or once at a time.

A schedule's fire times are pure functions of the schedule (cron expressions through
cronsim, in the schedule's time zone), so every beat process computes the same next
slot and claiming a slot in Redis is a compare-and-set on it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from enum import Enum
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from shared.models.config import AGENT_NAME_PATTERN, INTEGRAL
from shared.models.patterns import NOT_SPACE

__all__ = [
    "SCHEDULE_NAME_PATTERN",
    "Missed",
    "NewSchedule",
    "Overlap",
    "RunMode",
    "RunOutcome",
    "Schedule",
    "ScheduleRun",
    "ScheduleSpec",
    "ScheduleStatus",
]

SCHEDULE_NAME_PATTERN = AGENT_NAME_PATTERN
MIN_INTERVAL_S = 1.0
MAX_INTERVAL_S = 366 * 86_400.0


class RunMode(str, Enum):
    """Each run continues one long-lived conversation, or starts a new one."""

    CONTINUE = "continue"
    NEW = "new"


class Overlap(str, Enum):
    """A fire while the previous run still works: skip it, queue it, or cancel the running one."""

    SKIP = "skip"
    QUEUE = "queue"
    CANCEL = "cancel"


class Missed(str, Enum):
    """A fire missed while no beat ran: run it once on restart, or skip it."""

    RUN_ONCE = "run_once"
    SKIP = "skip"


# Exactly one of cron, every_s and at is given (not null): one of these matches, never two.
_ONE_TIMING: list[Any] = [
    {"required": [name], "properties": {name: {"not": {"type": "null"}}}}
    for name in ("cron", "every_s", "at")
]


class ScheduleSpec(BaseModel):
    """What an operator writes: which agent, what prompt, when, and what happens on overlap."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={"oneOf": _ONE_TIMING},  # the API says it: exactly one timing
    )

    agent: str = Field(pattern=AGENT_NAME_PATTERN, description="The named agent to run.")
    agent_version: Annotated[int, Field(gt=0), INTEGRAL] | None = Field(
        None, description="Pin a version of the agent; default: its latest at each fire."
    )
    prompt: str = Field(min_length=1, max_length=100_000, json_schema_extra={"pattern": NOT_SPACE})
    cron: str | None = Field(
        None,
        max_length=200,
        description="A cron expression: 5 fields, or 6 with seconds first (`*/2 * * * * *`).",
    )
    timezone: str = Field("UTC", max_length=64, description="IANA time zone of `cron`.")
    every_s: float | None = Field(
        None, ge=MIN_INTERVAL_S, le=MAX_INTERVAL_S, description="Fire every this many seconds."
    )
    at: AwareDatetime | None = Field(None, description="Fire once at this time (with offset).")
    conversation: RunMode = RunMode.NEW
    overlap: Overlap = Overlap.SKIP
    missed: Missed = Missed.RUN_ONCE

    @field_validator("prompt")
    @classmethod
    def _prompt_has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the prompt is only whitespace")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            message = f"unknown time zone {value!r} (an IANA name, e.g. Europe/Paris)"
            raise ValueError(message) from None
        return value

    @field_validator("cron")
    @classmethod
    def _cron_parses(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                CronSim(value, datetime.now(UTC))
            except (CronSimError, ValueError, IndexError) as exc:
                raise ValueError(f"bad cron expression {value!r}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_timing(self) -> ScheduleSpec:
        chosen = [n for n in ("cron", "every_s", "at") if getattr(self, n) is not None]
        if len(chosen) != 1:
            raise ValueError(f"give exactly one of cron, every_s or at (got {chosen or 'none'})")
        return self


class NewSchedule(ScheduleSpec):
    name: str = Field(pattern=SCHEDULE_NAME_PATTERN, description="Letters, digits, _ . - (1-64).")


class Schedule(NewSchedule):
    """A stored schedule; interval slots are counted from `created_at`."""

    created_at: float
    created_by: str

    def next_after(self, moment: float) -> float | None:
        """The first fire time strictly after `moment` (Unix time); None when none is left."""
        if self.cron is not None:
            zone = ZoneInfo(self.timezone)
            start = datetime.fromtimestamp(moment, zone)
            return next(CronSim(self.cron, start)).timestamp()
        if self.every_s is not None:
            slots = max(math.floor((moment - self.created_at) / self.every_s) + 1, 1)
            while self.created_at + slots * self.every_s <= moment:  # rounding
                slots += 1
            return self.created_at + slots * self.every_s
        assert self.at is not None
        at = self.at.timestamp()
        return at if at > moment else None

    def after_slot(self, due_ms: int, moment: float = 0.0) -> float | None:
        """The first fire time after the slot stored as `due_ms`, and after `moment`.

        Slots are stored in whole ms, so a stored one may sit up to half a ms before its
        fire time; looking from its own value would find that same slot again."""
        return self.next_after(max(moment, (due_ms + 1) / 1000))

    def next_times(self, after: float, count: int) -> list[float]:
        """The next `count` fire times after `after` (fewer when the schedule ends)."""
        found: list[float] = []
        moment: float | None = after
        while moment is not None and len(found) < count:
            moment = self.next_after(moment)
            if moment is not None:
                found.append(moment)
        return found


class RunOutcome(str, Enum):
    """What one fire did."""

    STARTED = "started"  # a new conversation, its prompt queued
    SENT = "sent"  # the prompt queued in the long-lived conversation
    CANCELLED_RUNNING = "cancelled_running"  # the running turn cancelled, the prompt queued
    QUEUED = "queued"  # waits for the running one (a new conversation starts when it ends)
    SKIPPED = "skipped"  # the previous run still worked and the policy is skip
    MISSED = "missed"  # due while no beat ran, and the policy is skip
    FAILED = "failed"  # the agent is gone, or Redis refused; `detail` says why


class ScheduleRun(BaseModel):
    """One fire of a schedule, as its runs log keeps it."""

    due: float = Field(description="The slot's due time (Unix time).")
    fired_at: float = Field(description="When the fire was handled.")
    outcome: RunOutcome
    conversation_id: str | None = None
    turn_id: str | None = None
    agent_version: int | None = None
    detail: str = ""


class ScheduleStatus(BaseModel):
    """A schedule with where it stands: paused, next fire times, its runs so far."""

    schedule: Schedule
    paused: bool
    next_fire_times: list[float] = Field(description="The next fires (Unix times), soonest first.")
    conversation_id: str | None = Field(
        description="The long-lived conversation, or the latest run's."
    )
    runs: int = Field(description="Fires that queued a prompt.")
    skipped: int = Field(description="Fires skipped by the overlap or the missed policy.")
    pending: int = Field(description="Queued fires waiting for the running one to end.")
    last_outcome: RunOutcome | None = None
