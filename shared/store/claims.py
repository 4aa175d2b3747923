"""Claims: a person says they are on a pending request, so others can leave it to them.

A claim is two fields of the notification's hash (`claimed_by`, `claimed_at`), set and
cleared by one script that first checks the request still waits; it changes nothing about
who may resolve it: anyone whose role and scopes allow it still may, and the resolution's
audit entry says who held it. Only who may resolve a request may claim it (the caller's
`Check`); its holder releases it, or an operator takes it back (`force`). Each claim and
release is an entry of the audit log (status pending, `claim` set).
"""

from __future__ import annotations

import json
import time

from shared.errors import Conflict, NotFound
from shared.models.events import ClaimEvent
from shared.models.notifications import ClaimAction, Notification
from shared.store.connection import storage_errors
from shared.store.emit import encode_event
from shared.store.lua import LuaScript
from shared.store.notifications import AUDIT_MAXLEN, Check, NotificationStore

__all__ = ["Claims"]

_CLAIM = LuaScript(
    "shared.store",
    "notification_claim.lua",
    keys=["notification"],
    args=["request"],
    decode=["request"],
)


class Claims:
    """Claims and releases of pending notifications, each audited."""

    def __init__(self, notifications: NotificationStore) -> None:
        self.notifications = notifications

    def claim(
        self, nid: str, *, actor: str, check: Check | None = None, scope: str = ""
    ) -> Notification:
        """Claims `nid` for `actor` (again: renewed); Conflict when another holds it or it is
        settled; `check` refuses (Forbidden) a caller who may not resolve it."""
        note = self.notifications.get(nid)
        if check is not None:
            check(note)
        self._run(note, ClaimAction.CLAIM, actor, force=False, scope=scope)
        return self.notifications.get(nid)

    def release(
        self, nid: str, *, actor: str, force: bool = False, scope: str = ""
    ) -> Notification:
        """Gives `nid` back; `force` (an operator) releases another's claim. Conflict when it
        is not claimed, another holds it (without `force`), or it is settled."""
        note = self.notifications.get(nid)
        self._run(note, ClaimAction.RELEASE, actor, force=force, scope=scope)
        return self.notifications.get(nid)

    def _run(
        self, note: Notification, action: ClaimAction, actor: str, *, force: bool, scope: str
    ) -> None:
        store, at = self.notifications, time.time()
        request = {"op": action.value, "actor": actor, "at": repr(at), "force": force}
        with storage_errors(f"claiming notification {note.id}"):
            reply = _CLAIM(store.client, [store.keys.notification(note.id)], [json.dumps(request)])
        if reply[0] != "ok":
            raise _refusal(note, action, reply)
        entry = {
            "notification_id": note.id,
            "conversation_id": note.conversation_id,
            "batch_id": note.batch_id or "",
            "status": "pending",
            "actor": actor,
            "at": at,
            "kind": "",
            "claim": action.value,
            "claimed_by": reply[1] if action is ClaimAction.RELEASE else actor,
            "tool": note.tool_name or "",
            "scope": scope,
        }
        holder = actor if action is ClaimAction.CLAIM else ""
        live = ClaimEvent(
            conversation_id=note.conversation_id, notification_id=note.id, claimed_by=holder
        )
        with storage_errors(f"auditing the claim of {note.id}"):
            store.client.xadd(store.keys.audit(), entry, maxlen=AUDIT_MAXLEN, approximate=True)  # type: ignore[arg-type]
            # Live only, so no stream id (the message starts with its separator): open
            # inboxes show who has it; nothing replays it, the page shows it when loaded. Not
            # pipelined with the audit row: a Redis Cluster client sends PUBLISH on its own.
            store.client.publish(store.keys.live_all(), f" {encode_event(live)}")


def _refusal(note: Notification, action: ClaimAction, reply: list[str]) -> Exception:
    status, nid = reply[0], note.id
    if status == "not_found":
        return NotFound(f"notification {nid} does not exist")
    if status == "free":
        return Conflict(f"notification {nid} is not claimed: there is nothing to release")
    if status == "held":
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(reply[2] or 0)))
        what = "claim" if action is ClaimAction.CLAIM else "release"
        return Conflict(
            f"notification {nid} is claimed by {reply[1]} since {since}; you may not {what} "
            "it (its holder releases it, or an operator; anyone may still resolve it)"
        )
    return Conflict(
        f"notification {nid} is {status} (by {reply[1] or 'the system'}): it waits no more"
    )
