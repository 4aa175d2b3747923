"""Times as people read them: "3 min ago", "in 2 h", with the exact time for a tooltip.

The server renders the relative text so a page reads right without JavaScript; the page's
script (static/app.js) keeps it current and shows the local time on hover from `datetime`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from flask import Flask
from markupsafe import Markup, escape

__all__ = ["gap", "init_app", "relative", "time_tag"]

_UNITS = ((86_400, "d"), (3_600, "h"), (60, "min"))


def relative(at: float, now: float | None = None) -> str:
    """`at` against now: "just now", "5 min ago", "in 3 h"."""
    delta = at - (time.time() if now is None else now)
    seconds = abs(delta)
    if seconds < 45:
        return "just now" if delta <= 0 else "in under a minute"
    amount, unit = next(
        (round(seconds / size), name) for size, name in _UNITS if seconds >= size * 0.75
    )
    return f"in {amount} {unit}" if delta > 0 else f"{amount} {unit} ago"


def gap(seconds: float) -> str:
    """A span between two steps: "0.4 s", "12 s", "3 min", "2 h"."""
    seconds = max(seconds, 0.0)
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{round(seconds)} s"
    amount, unit = next(
        (round(seconds / size), name) for size, name in _UNITS if seconds >= size * 1.5
    )
    return f"{amount} {unit}"


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


def time_tag(at: float | None, empty: str = "never") -> Markup:
    """A `<time>`: relative text, titled with the UTC time until the script localises it."""
    if not at:
        return Markup('<span class="muted">{}</span>').format(empty)
    iso = _iso(at)
    return Markup('<time datetime="{}" title="{} UTC" data-relative>{}</time>').format(
        iso, escape(iso.replace("T", " ")[:19]), relative(at)
    )


def init_app(app: Flask) -> None:
    app.add_template_filter(time_tag, "when")
    app.add_template_filter(relative, "relative")
    app.add_template_global(gap, "gap")  # macros see globals only
