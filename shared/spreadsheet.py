"""Text bound for a spreadsheet: a cell that opens as text, never as a formula it would run."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["FORMULA_STARTS", "cell", "safe_cell"]

# What makes Excel, LibreOffice or Google Sheets read a cell as a formula (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(text: str) -> str:
    """`text`, with a leading apostrophe when it would start a formula (CSV injection)."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def cell(value: Any) -> str:
    """A value as a CSV cell: numbers as they are (a number is no formula), text made safe,
    lists and objects as JSON, nothing as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | dict):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return safe_cell(str(value))
