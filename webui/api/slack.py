"""/slack/interactions: Slack's Allow and Deny buttons, and the Deny reason's modal.

Authenticated by Slack's signature alone: `X-Slack-Signature` over the raw body with the
signing secret, `X-Slack-Request-Timestamp` within five minutes (slack-sdk's
`SignatureVerifier`); otherwise a 401. The Slack user must be mapped to an enabled Signoff
account (`signoff user slack NAME SLACK_ID`); it resolves as that account, within its role,
scopes and separation of duties, and the message is updated with the outcome. A replayed
action finds the request settled and changes nothing.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Blueprint, Response, jsonify, request
from pydantic import BaseModel, Field
from slack_sdk.signature import SignatureVerifier

from shared.approvers import ResolveCheck
from shared.errors import Conflict, Forbidden, InvalidInput, SignoffError
from shared.models.notifications import Allow, Deny, Notification, Resolution
from shared.slack import (
    ALLOW_ACTION,
    DENY_ACTION,
    DENY_VIEW,
    REASON_BLOCK,
    SlackApi,
    outcome_text,
)
from webui.auth import signature_authenticated
from webui.errors import HttpProblem
from webui.operations import operation
from webui.services import services

__all__ = ["SlackInteraction", "blueprint"]

log = logging.getLogger(__name__)


class SlackInteraction(BaseModel):
    """What Slack posts (form-encoded): the interaction as JSON in `payload`."""

    payload: str = Field(description="block_actions or view_submission, as Slack sends it.")


class _SlackUser:
    """The Signoff account a Slack user is mapped to: a `shared.approvers.Approver`."""

    def __init__(self, name: str, record: Any) -> None:
        self.name = name
        self.role = record.role
        self.scopes = tuple(record.scopes)


def _verified() -> dict[str, Any]:
    svc = services()
    secret = svc.settings.slack_signing_secret.get_secret_value()
    body = request.get_data(as_text=True)
    ok = bool(secret) and SignatureVerifier(secret).is_valid(
        body,
        request.headers.get("X-Slack-Request-Timestamp", ""),
        request.headers.get("X-Slack-Signature", ""),
    )
    if not ok:
        raise HttpProblem(
            401,
            "bad_signature",
            "the X-Slack-Signature is missing, wrong, or its timestamp is not within 5 minutes",
            headers={"WWW-Authenticate": "Signature"},
        )
    try:
        payload: dict[str, Any] = json.loads(request.form.get("payload", ""))
    except ValueError:
        raise InvalidInput("payload: not the JSON of a Slack interaction") from None
    return payload


def _caller(payload: dict[str, Any]) -> ResolveCheck:
    slack_user = str((payload.get("user") or {}).get("id", ""))
    found = services().users.by_slack_user(slack_user)
    if found is None:
        raise Forbidden(f"Slack user {slack_user[:40]!r} is not mapped to a Signoff account")
    return ResolveCheck(_SlackUser(*found), services().stores)


def _resolve(check: ResolveCheck, nid: str, decision: Resolution) -> Notification:
    """Resolves as the Slack user's account; a settled request is told, not changed."""
    store = services().notifications
    try:
        note = store.resolve(
            nid, decision, actor=check.identity, check=check, audit_scope=check.audit_scope
        )
    except Conflict:
        note = store.get(nid)
    _update_messages(note)
    return note


def _update_messages(note: Notification) -> None:
    """Every Slack message asking about `note` shows its outcome (or who allowed so far)."""
    svc = services()
    posted: dict[str, str] = svc.redis.hgetall(svc.keys.slack_messages(note.id))  # type: ignore[assignment]
    if not posted:
        return
    api = SlackApi(svc.settings)
    try:
        for channel, ts in posted.items():
            api.update(channel, ts, outcome_text(note))
    except SignoffError as exc:  # Slack away: the resolution stands; the message lags
        log.warning("slack update of %s: %s", note.id, exc)
    finally:
        api.close()


@signature_authenticated
@operation(
    "Slack's interactions: Allow, Deny (a modal asks the reason), and the reason submitted",
    request=SlackInteraction,
    errors=(400, 401, 403, 422),
    description="Authenticated by Slack's signature (X-Slack-Signature, "
    "X-Slack-Request-Timestamp within 5 minutes) with SIGNOFF_SLACK_SIGNING_SECRET.",
)
def interactions() -> Response:
    payload = _verified()
    check = _caller(payload)
    kind = payload.get("type")
    if kind == "block_actions":
        action = (payload.get("actions") or [{}])[0]
        nid = str(action.get("value", ""))
        if action.get("action_id") == ALLOW_ACTION:
            _resolve(check, nid, Allow())
        elif action.get("action_id") == DENY_ACTION:
            check(services().notifications.get(nid))  # refused before the modal opens
            api = SlackApi(services().settings)
            try:
                api.ask_reason(str(payload.get("trigger_id", "")), nid)
            finally:
                api.close()
        return jsonify({})
    if kind == "view_submission" and (payload.get("view") or {}).get("callback_id") == DENY_VIEW:
        view = payload["view"]
        values = view.get("state", {}).get("values", {})
        reason = str(values.get(REASON_BLOCK, {}).get(REASON_BLOCK, {}).get("value") or "")
        if not reason.strip():
            return jsonify({"response_action": "errors", "errors": {REASON_BLOCK: "Say why."}})
        _resolve(check, str(view.get("private_metadata", "")), Deny(reason=reason))
        return jsonify({})
    raise InvalidInput(f"payload: interactions of type {str(kind)[:40]!r} are not handled")


def blueprint() -> Blueprint:
    bp = Blueprint("slack", __name__)
    bp.add_url_rule("/slack/interactions", view_func=interactions, methods=["POST"])
    return bp
