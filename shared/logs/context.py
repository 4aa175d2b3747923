"""The conversation and turn a log line is about, kept in context variables.

The worker sets them around a leg (`worker/runtime.py`), the web around a request that
names a conversation; each greenlet and thread has its own context, so the legs and
requests of one process never mix their ids.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

__all__ = ["FIELDS", "Bound", "ContextFilter", "bind", "current", "log_context", "unbind"]

FIELDS = ("conversation_id", "turn_id", "trace_id")
_VARS: dict[str, ContextVar[str]] = {name: ContextVar(name, default="") for name in FIELDS}


def current() -> dict[str, str]:
    """The fields set here, without the empty ones."""
    found = {name: var.get() for name, var in _VARS.items()}
    return {name: value for name, value in found.items() if value}


Bound = list[tuple[ContextVar[str], Token[str]]]


def bind(**fields: str) -> Bound:
    """Lines logged from now on carry `fields`, until `unbind` with what this returns."""
    return [(_VARS[name], _VARS[name].set(value)) for name, value in fields.items()]


def unbind(bound: Bound) -> None:
    for var, token in reversed(bound):
        var.reset(token)


@contextmanager
def log_context(**fields: str) -> Iterator[None]:
    """Lines logged inside carry `fields` (conversation_id, turn_id)."""
    bound = bind(**fields)
    try:
        yield
    finally:
        unbind(bound)


class ContextFilter(logging.Filter):
    """Puts the context's fields on each record (empty where there is none)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in _VARS.items():
            if not getattr(record, name, ""):
                setattr(record, name, var.get())
        return True
