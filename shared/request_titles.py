"""A request's title: what it would do, the tool and its one or two most telling arguments. Pure.

`send_email to ana@example.com: "Refund 120 EUR"` tells one request from the next where
"Allow send_email?" does not. Which arguments tell is the operator's choice per tool, kept
with the tool policy (`PolicyStore.title_arguments`); without one, the first short string
arguments (else the first scalar ones). The text is plain: whoever shows it escapes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from shared.models.notifications import Notification

__all__ = [
    "ARGUMENT_NAME_PATTERN",
    "MAX_TITLE_ARGUMENTS",
    "default_title_arguments",
    "request_title",
    "title_of_call",
]

MAX_TITLE_ARGUMENTS = 2
ARGUMENT_NAME_PATTERN = r"^[A-Za-z0-9_.\-]{1,64}$"
_SHORT = 80  # a string argument this long or shorter can title a request by default
_VALUE_CHARS = 48  # each value shown is cut to this many characters
_BARE = re.compile(r"[^\s\"]{1,40}")  # a first value shown without quotes


def default_title_arguments(args: Mapping[str, Any]) -> list[str]:
    """The first two short string arguments; else the first two numbers or booleans."""
    strings = [n for n, v in args.items() if isinstance(v, str) and 0 < len(v.strip()) <= _SHORT]
    if strings:
        return strings[:MAX_TITLE_ARGUMENTS]
    scalars = [n for n, v in args.items() if isinstance(v, int | float)]
    return scalars[:MAX_TITLE_ARGUMENTS]


def _text(value: Any) -> str:
    raw = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(raw.split())
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def title_of_call(tool: str, args: Mapping[str, Any], chosen: Sequence[str] = ()) -> str:
    """`tool name value: "value"`: the chosen arguments the call has, else the default ones."""
    names = [name for name in chosen if name in args][:MAX_TITLE_ARGUMENTS]
    names = names or default_title_arguments(args)
    if not names:
        return tool
    first = _text(args[names[0]])
    shown = first if _BARE.fullmatch(first) else json.dumps(first, ensure_ascii=False)
    title = f"{tool} {names[0]} {shown}"
    if len(names) > 1:
        title += f": {json.dumps(_text(args[names[1]]), ensure_ascii=False)}"
    return title


def request_title(note: Notification, chosen: Mapping[str, Sequence[str]] | None = None) -> str:
    """A tool call's title from its arguments; a question's (or anything else's) own title.

    `chosen`: the operator's title arguments by tool.
    """
    call = note.tool_call
    if call is None or note.question is not None:
        return note.title
    return title_of_call(call.name, call.args, (chosen or {}).get(call.name, ()))
