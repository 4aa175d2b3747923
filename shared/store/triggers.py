"""Triggers operators defined, and the event ids each has seen (so a replay is refused).

An event id is remembered for `EVENT_TTL_S`, far longer than the timestamp window
(`SIGNOFF_TRIGGER_TOLERANCE_S`) outside which a request is refused anyway, so no replay
gets through; remembering it is what makes the same id start one conversation only.
"""

from __future__ import annotations

import hashlib
import json
import time

import redis
from pydantic import ValidationError

from shared.errors import Conflict, CorruptRecord, NotFound
from shared.models.triggers import Trigger, TriggerRequest
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.webhooks.prompt_template import PromptTemplate
from shared.webhooks.signing import new_secret

__all__ = ["EVENT_TTL_S", "TriggerStore", "event_digest"]

EVENT_TTL_S = 86_400


def event_digest(event_id: str) -> str:
    """A key-safe name of a sender's event id (any text)."""
    return hashlib.sha256(event_id.encode()).hexdigest()[:32]


class TriggerStore:
    """Trigger definitions and seen event ids."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.keys = keys

    def create(self, request: TriggerRequest, *, actor: str) -> Trigger:
        """Stores a new trigger (a name in use is a Conflict); the answer carries its secret."""
        PromptTemplate.parse(request.template)
        trigger = Trigger(
            name=request.name,
            agent=request.agent,
            template=request.template,
            description=request.description,
            secret=request.secret or new_secret(),
            created_at=time.time(),
            created_by=actor,
        )
        with storage_errors(f"creating trigger {request.name}"):
            created = self.client.hsetnx(self.keys.triggers(), request.name, _doc(trigger))
        if not created:
            raise Conflict(f"trigger {request.name!r} exists: delete it first, or pick a name")
        return trigger

    def get(self, name: str) -> Trigger:
        with storage_errors(f"reading trigger {name}"):
            raw = self.client.hget(self.keys.triggers(), name)
        if raw is None:
            raise NotFound(f"no trigger {name!r}")
        return _parse(name, str(raw))

    def all(self) -> list[Trigger]:
        with storage_errors("reading triggers"):
            raw: dict[str, str] = self.client.hgetall(self.keys.triggers())  # type: ignore[assignment]
        return sorted((_parse(n, d) for n, d in raw.items()), key=lambda t: t.name)

    def delete(self, name: str) -> Trigger:
        trigger = self.get(name)
        with storage_errors(f"deleting trigger {name}"):
            self.client.hdel(self.keys.triggers(), name)
        return trigger

    def rotate_secret(self, name: str) -> Trigger:
        """Gives the trigger a new secret: events signed with the old one are refused from
        now on. The answer carries the new secret (shown once, like a new trigger's)."""
        index = self.keys.triggers()
        with (
            storage_errors(f"rotating the secret of trigger {name}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            while True:
                try:
                    pipe.watch(index)  # a deletion meanwhile is not undone by the write
                    raw = pipe.hget(index, name)
                    if raw is None:
                        raise NotFound(f"no trigger {name!r}")
                    rotated = _parse(name, str(raw)).model_copy(update={"secret": new_secret()})
                    pipe.multi()
                    pipe.hset(index, name, _doc(rotated))
                    pipe.execute()
                    return rotated
                except redis.WatchError:
                    continue

    def claim_event(self, name: str, event_id: str, conversation_id: str) -> str | None:
        """Records that `event_id` starts `conversation_id`; if it was seen, the conversation
        it started then (and nothing is recorded)."""
        key = self.keys.trigger_event(name, event_digest(event_id))
        with storage_errors(f"recording an event of trigger {name}"):
            if self.client.set(key, conversation_id, nx=True, ex=EVENT_TTL_S):
                return None
            return str(self.client.get(key) or conversation_id)

    def forget_event(self, name: str, event_id: str) -> None:
        """Lets an event id be sent again (its conversation could not be started)."""
        with storage_errors(f"recording an event of trigger {name}"):
            self.client.delete(self.keys.trigger_event(name, event_digest(event_id)))


def _doc(trigger: Trigger) -> str:
    """The stored form: the model with its secret (which the model leaves out of dumps)."""
    return json.dumps(trigger.model_dump(mode="json") | {"secret": trigger.secret})


def _parse(name: str, doc: str) -> Trigger:
    try:
        return Trigger.model_validate_json(doc)
    except ValidationError as exc:
        raise CorruptRecord(f"trigger {name} is unreadable: {exc}") from exc
