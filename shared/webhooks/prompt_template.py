"""Trigger prompt templates: text with `{payload.issue.title}` fields, and nothing else.

A field is a path into the event's JSON: `payload`, then keys (letters, digits, _ and -)
or list positions, joined by dots. No attribute access, no format specs or conversions,
no expressions: a template can only copy values out of the payload, so a sender cannot
make it run anything. Strings are copied as they are, other values as JSON. `{{` and
`}}` are literal braces. Sans I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from shared.errors import InvalidInput
from shared.template_pieces import MAX_TEMPLATE_CHARS, format_pieces

__all__ = ["MAX_TEMPLATE_CHARS", "PromptTemplate"]

MAX_FIELDS = 50
_ROOT = "payload"
_SEGMENT = re.compile(r"[A-Za-z0-9_\-]{1,100}")


@dataclass(frozen=True)
class _Part:
    literal: str
    path: tuple[str, ...] | None  # None: the template ends with this literal


@dataclass(frozen=True)
class PromptTemplate:
    """A parsed template; `parse` refuses a bad one naming the problem."""

    text: str
    parts: tuple[_Part, ...]

    @classmethod
    def parse(cls, text: str) -> PromptTemplate:
        pieces = format_pieces(text)
        parts = tuple(
            _part(literal, field, spec, conversion) for literal, field, spec, conversion in pieces
        )
        if sum(part.path is not None for part in parts) > MAX_FIELDS:
            raise InvalidInput(f"template: at most {MAX_FIELDS} fields")
        return cls(text, parts)

    def render(self, payload: Any) -> str:
        """The prompt for `payload`; a field the payload lacks is InvalidInput naming it."""
        out: list[str] = []
        for part in self.parts:
            out.append(part.literal)
            if part.path is not None:
                out.append(_text(_lookup(payload, part.path)))
        return "".join(out)


def _part(literal: str, field: str | None, spec: str | None, conversion: str | None) -> _Part:
    if field is None:
        return _Part(literal, None)
    if spec or conversion:
        raise InvalidInput(f"template: field {{{field}}} may not have a format spec or conversion")
    segments = field.split(".")
    if segments[0] != _ROOT or not all(_SEGMENT.fullmatch(s) for s in segments[1:]):
        raise InvalidInput(
            f"template: field {{{field}}} must be a path like {{payload.issue.title}}: "
            "payload, then keys or list positions joined by dots"
        )
    return _Part(literal, tuple(segments[1:]))


def _lookup(payload: Any, path: tuple[str, ...]) -> Any:
    value = payload
    for depth, key in enumerate(path):
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            where = ".".join((_ROOT, *path[: depth + 1]))
            raise InvalidInput(f"the event has no {where} (the trigger's template asks for it)")
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
