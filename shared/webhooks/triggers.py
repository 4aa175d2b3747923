"""Firing a trigger: a signed external event becomes a conversation of the trigger's agent.

The request is authenticated by its Standard Webhooks signature alone (the trigger's
secret), and its timestamp must be within `SIGNOFF_TRIGGER_TOLERANCE_S` of now. Its
`webhook-id` is the event's id: the first request with an id starts a conversation, a
later one with the same id is refused as a duplicate naming that conversation.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from shared.client import Client
from shared.errors import Conflict, InvalidInput, NotFound
from shared.models.owners import InternalOwner, internal_owner
from shared.models.triggers import TriggerFired
from shared.store.triggers import TriggerStore, event_digest
from shared.webhooks.prompt_template import PromptTemplate
from shared.webhooks.signing import SignatureRefused, verify

__all__ = ["DuplicateEvent", "fire", "trigger_owner"]


class DuplicateEvent(Conflict):
    """Raised when a trigger gets an event id it has already seen (a replay)."""

    code = "duplicate_event"

    @property
    def conversation_id(self) -> str:
        return str(self.args[1]) if len(self.args) > 1 else ""


def trigger_owner(name: str) -> str:
    """Who a trigger's conversations are recorded as created by."""
    return internal_owner(InternalOwner.TRIGGER, name)


def fire(client: Client, name: str, headers: Mapping[str, str], body: str) -> TriggerFired:
    """Verifies, renders and starts; SignatureRefused, InvalidInput or DuplicateEvent if not."""
    store = TriggerStore(client.redis, client.keys)
    try:
        trigger = store.get(name)
    except NotFound:  # the same answer as a wrong signature: names are not probed from outside
        raise SignatureRefused("the signature does not match") from None
    verified = verify(
        trigger.secret,
        headers,
        body,
        now=time.time(),
        tolerance_s=client.settings.trigger_tolerance_s,
    )
    prompt = PromptTemplate.parse(trigger.template).render(_payload(body))
    cid = f"trigger.{name}.{event_digest(verified.msg_id)[:24]}"
    seen = store.claim_event(name, verified.msg_id, cid)
    if seen is not None:
        raise DuplicateEvent(
            f"event {verified.msg_id!r} was already received: it started conversation {seen}",
            seen,
        )
    try:
        conversation = client.new_conversation(
            agent=trigger.agent,
            conversation_id=cid,
            owner=trigger_owner(name),
            policy_may_loosen=False,
        )
        turn_id = conversation.send(prompt)
    except BaseException:
        store.forget_event(name, verified.msg_id)
        raise
    return TriggerFired(trigger=name, conversation_id=cid, turn_id=str(turn_id))


def _payload(body: str) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:
        raise InvalidInput(f"the event must be JSON: {exc}") from None
