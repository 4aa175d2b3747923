"""The checks every prompt template passes before its fields mean anything.

Batch CSV templates (`shared/batches/template.py`) and trigger templates
(`shared/webhooks/prompt_template.py`) read different fields, but refuse an empty or
oversized template and unbalanced braces alike, with the same message.
"""

from __future__ import annotations

import string

from shared.errors import InvalidInput

__all__ = ["MAX_TEMPLATE_CHARS", "format_pieces"]

MAX_TEMPLATE_CHARS = 10_000


def format_pieces(text: str) -> list[tuple[str, str | None, str | None, str | None]]:
    """`string.Formatter().parse` of `text`, refusing what no template may be."""
    if not text.strip():
        raise InvalidInput("template: must not be empty")
    if len(text) > MAX_TEMPLATE_CHARS:
        raise InvalidInput(f"template: at most {MAX_TEMPLATE_CHARS} characters")
    try:
        return list(string.Formatter().parse(text))
    except ValueError as exc:
        raise InvalidInput(f"template: {exc} (write {{{{ and }}}} for literal braces)") from None
