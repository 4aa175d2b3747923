"""Reading a conversation's event stream: replay from an id, or block for what comes next."""

from __future__ import annotations

from typing import Any

import redis
from pydantic import ValidationError

from shared.errors import CorruptRecord
from shared.models.events import EVENT, EventBase
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace

__all__ = ["EventLog", "parse_event"]

START = "0-0"


def parse_event(stream_key: str, stream_id: str, payload: str) -> EventBase:
    """Parses one stored event; an unreadable one names its key and id."""
    try:
        event = EVENT.validate_json(payload)
    except ValidationError as exc:
        raise CorruptRecord(
            f"event {stream_id} of {stream_key} does not parse: {exc.errors()[0]['msg']}"
        ) from exc
    event.id = stream_id
    return event


class EventLog:
    """The event stream of conversations, by id."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.keys = keys

    def last_id(self, cid: str) -> str:
        with storage_errors(f"reading events of conversation {cid}"):
            entries = self.client.xrevrange(self.keys.events(cid), count=1)
        return str(entries[0][0]) if entries else START

    def after(self, cid: str, after_id: str = START, *, count: int = 500) -> list[EventBase]:
        """Events strictly after `after_id`, oldest first (a replay page)."""
        key = self.keys.events(cid)
        with storage_errors(f"reading events of conversation {cid}"):
            entries: Any = self.client.xrange(key, min=f"({after_id}", count=count)
        return [parse_event(key, str(sid), str(fields["e"])) for sid, fields in entries]

    def wait(self, cid: str, after_id: str, *, block_ms: int, count: int = 500) -> list[EventBase]:
        """Blocks up to `block_ms` for events after `after_id` (woken by Redis, no polling)."""
        key = self.keys.events(cid)
        with storage_errors(f"waiting for events of conversation {cid}"):
            reply: Any = self.client.xread({key: after_id}, count=count, block=block_ms)
        if not reply:
            return []
        return [parse_event(key, str(sid), str(fields["e"])) for sid, fields in reply[0][1]]
