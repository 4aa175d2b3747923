"""Which calls a provider's rate limit serves first: a conversation's priority class.

People waiting on a chat come first, then what schedules and triggers started, then batch
items, whose batches take turns (shared/store/rate_limit.py). The class follows from the
conversation: a batch id makes it a batch item, a schedule's or a trigger's owner makes it
scheduled, anything else is interactive. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from shared.models.config import ConversationConfig
from shared.models.owners import OWNER_SEPARATOR, InternalOwner

__all__ = ["INTERACTIVE", "Priority", "PriorityClass", "priority_of"]


class PriorityClass(str, Enum):
    """Waiting classes, served in this order."""

    INTERACTIVE = "interactive"
    SCHEDULED = "scheduled"
    BATCH = "batch"


@dataclass(frozen=True)
class Priority:
    """A waiter's class, and for a batch item its batch (the unit that takes turns)."""

    cls: PriorityClass
    batch_id: str = ""


INTERACTIVE = Priority(PriorityClass.INTERACTIVE)
_SCHEDULED_OWNERS = (InternalOwner.SCHEDULE.value, InternalOwner.TRIGGER.value)


def priority_of(config: ConversationConfig, owner: str | None) -> Priority:
    """The priority of a conversation's model calls, from its config and its owner."""
    if config.batch_id:
        return Priority(PriorityClass.BATCH, config.batch_id)
    kind, separator, _ = (owner or "").partition(OWNER_SEPARATOR)
    if separator and kind in _SCHEDULED_OWNERS:
        return Priority(PriorityClass.SCHEDULED)
    return INTERACTIVE
