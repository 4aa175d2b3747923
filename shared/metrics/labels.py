"""Label values with a bound: a label takes at most `MAX_VALUES` values per process.

Model, agent and tool names come from configuration, but a submitter may name any model
and a model may call a tool that does not exist: each new value would be a new series in
every process. Past the bound a value is counted as `other`, so no input can grow the
number of series without limit. Ids never reach a label: callers pass names only.
"""

from __future__ import annotations

import threading

__all__ = ["MAX_VALUES", "NONE", "OTHER", "BoundedLabel"]

MAX_VALUES = 100
NONE = "none"  # no agent, no model: an empty label would read as an absent one
OTHER = "other"
MAX_CHARS = 80


class BoundedLabel:
    """The values one label has taken in this process, up to `limit`."""

    def __init__(self, name: str, *, limit: int = MAX_VALUES) -> None:
        self.name = name
        self.limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str | None) -> str:
        """`value` as a label value: itself while the bound allows, else `other`."""
        if not value:
            return NONE
        value = value[:MAX_CHARS]
        if value in self._seen:
            return value
        with self._lock:
            if len(self._seen) >= self.limit:
                return OTHER
            self._seen.add(value)
        return value
