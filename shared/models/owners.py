"""Who created a conversation: a caller's name, or an internal owner no caller can be named.

A batch's items, a trigger's and a schedule's conversations are recorded as created by
``batch:<id>``, ``trigger:<name>`` and ``schedule:<name>``. The separator is a character no
username or token name may hold, so no caller is ever taken for one of them. Pure: no I/O.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["OWNER_SEPARATOR", "InternalOwner", "internal_owner", "is_internal_owner"]

OWNER_SEPARATOR = ":"


class InternalOwner(str, Enum):
    """The kinds of creator that are not callers."""

    BATCH = "batch"
    TRIGGER = "trigger"
    SCHEDULE = "schedule"


def internal_owner(kind: InternalOwner, name: str) -> str:
    """The owner recorded on conversations that `kind` `name` creates."""
    return f"{kind.value}{OWNER_SEPARATOR}{name}"


def is_internal_owner(name: str) -> bool:
    """Whether `name` has the internal owners' form (so it may not name a caller)."""
    return OWNER_SEPARATOR in name
