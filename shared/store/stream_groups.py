"""Consumer groups that readers make on first use, whoever comes first."""

from __future__ import annotations

from typing import Any

import redis

__all__ = ["ensure_group"]


def ensure_group(client: Any, stream: str, group: str, *, start: str = "0") -> None:
    """Makes `group` on `stream` (and the stream) from `start` unless it exists already: "0"
    reads what was written before the first reader, "$" only what comes after."""
    try:
        client.xgroup_create(stream, group, id=start, mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
