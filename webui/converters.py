"""URL converters: ids in paths must be ids that can exist (others are a plain 404)."""

from __future__ import annotations

from werkzeug.routing import BaseConverter

__all__ = ["IdConverter"]


class IdConverter(BaseConverter):
    """The characters `shared.keys.check_id` accepts."""

    regex = r"[A-Za-z0-9_.\-]{1,128}"
