"""A batch's prompt template over CSV columns: `Classify: {subject}` and nothing else.

A field is a column's name, written as `str.format` writes a field, but never handed to
`str.format`: the template is split into literals and names once, and rendering copies
each named cell in. So no attribute or index access (`{a.b}`, `{a[0]}`), no positions
(`{}`, `{0}`), no format spec or conversion: a cell can only be copied, never evaluated.
`{{` and `}}` are literal braces. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from shared.errors import InvalidInput
from shared.template_pieces import MAX_TEMPLATE_CHARS, format_pieces

__all__ = ["MAX_TEMPLATE_CHARS", "ColumnTemplate"]

MAX_FIELDS = 100
_ACCESS = re.compile(r"[.\[\]]")  # what str.format would read as attribute or index access


@dataclass(frozen=True)
class _Part:
    literal: str
    column: str | None  # None: the template ends with this literal


@dataclass(frozen=True)
class ColumnTemplate:
    """A parsed template; `parse` refuses a bad one naming the field and what is wrong."""

    text: str
    parts: tuple[_Part, ...]

    @classmethod
    def parse(cls, text: str) -> ColumnTemplate:
        pieces = format_pieces(text)
        parts = tuple(_part(*piece) for piece in pieces)
        if sum(part.column is not None for part in parts) > MAX_FIELDS:
            raise InvalidInput(f"template: at most {MAX_FIELDS} fields")
        return cls(text, parts)

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it names, each once, in the order first named."""
        return tuple(dict.fromkeys(p.column for p in self.parts if p.column is not None))

    def render(self, cells: Mapping[str, str]) -> str:
        """The prompt of one row; every named column must be in `cells` (checked before)."""
        return "".join(
            part.literal + (cells[part.column] if part.column is not None else "")
            for part in self.parts
        )


def _part(literal: str, field: str | None, spec: str | None, conversion: str | None) -> _Part:
    if field is None:
        return _Part(literal, None)
    shown = "{" + field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
    shown += "}"
    if not field.strip():
        raise InvalidInput(f"template: {shown} names no column: write its name, as {{subject}}")
    if field.isdigit():
        raise InvalidInput(f"template: {shown} is a position; name a column, as {{subject}}")
    if _ACCESS.search(field):
        raise InvalidInput(f"template: {shown}: a column's name only, no attribute or index access")
    if spec or conversion:
        raise InvalidInput(f"template: {shown}: no format spec or conversion, only a column")
    return _Part(literal, field)
