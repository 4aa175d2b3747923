"""URL converters: ids in paths must be ids that can exist (others are a plain 404)."""

from __future__ import annotations

from werkzeug.routing import BaseConverter

from shared.keys import ID_PATTERN

__all__ = ["IdConverter"]


class IdConverter(BaseConverter):
    """The characters `shared.keys.check_id` accepts (werkzeug anchors the pattern)."""

    regex = ID_PATTERN
