"""One line that tells one request from another: a tool call's arguments, read by a person.

Well-known argument names come first (who it goes to, what it is about, which file), then
the others in order; each value is cut short, and the whole line too.
"""

from __future__ import annotations

import json
from typing import Any

from shared.models.notifications import Notification

__all__ = ["LINE_CHARS", "summarize_arguments", "summarize_request"]

LINE_CHARS = 140
_VALUE_CHARS = 60
_FIRST = (
    "to", "recipient", "recipients", "subject", "path", "file", "url", "command", "query",
    "question", "expression", "name", "amount",
)  # fmt: skip


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def summarize_arguments(args: dict[str, Any]) -> str:
    """`to=ana@example.org · subject=Invoice 12 · …`, at most LINE_CHARS characters."""
    names = [n for n in _FIRST if n in args] + [n for n in args if n not in _FIRST]
    line = " · ".join(f"{name}={_value(args[name])}" for name in names)
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def summarize_request(note: Notification) -> str:
    """The arguments of a tool call, or the question asked, on one line."""
    if note.tool_call is not None:
        return summarize_arguments(note.tool_call.args) or "(no arguments)"
    text = " ".join((note.question or note.body or "").split())
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"
