"""Slack's Web API, the little of it approvals use: post a request with Allow and Deny
buttons, update it with the outcome, open the modal that asks a denial's reason.

Calls go through `shared.outbound` (Slack's address is checked like any operator-set host;
tests point SIGNOFF_SLACK_API_URL at a stand-in on loopback and allow it).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from shared.errors import ProviderError
from shared.models.notifications import Deny, Notification
from shared.outbound import OutboundPolicy, guarded_client
from shared.settings import Settings

__all__ = ["ALLOW_ACTION", "DENY_ACTION", "DENY_VIEW", "REASON_BLOCK", "SlackApi", "outcome_text"]

ALLOW_ACTION = "signoff_allow"
DENY_ACTION = "signoff_deny"
DENY_VIEW = "signoff_deny_reason"
REASON_BLOCK = "reason"
_TEXT_CHARS = 2_500


def _summary(note: Notification) -> str:
    lines = [f"*{note.title}*", f"Request `{note.id}`"]
    if note.tool_call is not None:
        arguments = json.dumps(note.tool_call.args, ensure_ascii=False)
        lines.append(f"`{note.tool_call.name}` {arguments}")
    text = "\n".join(lines)
    return text if len(text) <= _TEXT_CHARS else text[: _TEXT_CHARS - 1] + "…"


def outcome_text(note: Notification) -> str:
    """What a message about `note` says once it moved: the decision, or who allowed so far."""
    if note.resolution is None:
        if note.allowed_by:
            names = ", ".join(a.by for a in note.allowed_by)
            return f"*{note.title}*: allowed so far by {names} ({note.approvals_needed} needed)"
        return f"*{note.title}*: {note.status.value}"
    verb = {"allow": "Allowed", "deny": "Denied", "submit": "Answered"}[note.resolution.kind]
    reason = f": {note.resolution.reason}" if isinstance(note.resolution, Deny) else ""
    return f"*{note.title}*: {verb} by {note.resolved_by}{reason}"


class SlackApi:
    """One HTTP client for Slack's Web API with the bot token."""

    def __init__(self, settings: Settings) -> None:
        self.base = settings.slack_api_url.rstrip("/")
        token = settings.slack_bot_token.get_secret_value()
        self.http = guarded_client(
            OutboundPolicy(settings.outbound_allow),
            timeout=settings.webhook_timeout_s,
            follow_redirects=False,
            headers={"authorization": f"Bearer {token}"},
        )

    def post_request(self, channel: str, note: Notification) -> tuple[str, str]:
        """Posts the request with its buttons; returns (channel id, message ts)."""
        text = _summary(note)
        buttons = [
            {"type": "button", "text": {"type": "plain_text", "text": label}, **extra}
            for label, extra in (
                ("Allow", {"action_id": ALLOW_ACTION, "value": note.id, "style": "primary"}),
                ("Deny", {"action_id": DENY_ACTION, "value": note.id, "style": "danger"}),
            )
        ]
        blocks = [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {"type": "actions", "block_id": "signoff", "elements": buttons},
        ]
        answer = self._call("chat.postMessage", channel=channel, text=text, blocks=blocks)
        return str(answer.get("channel", channel)), str(answer["ts"])

    def update(self, channel: str, ts: str, text: str) -> None:
        """Replaces the message (and its buttons) with `text`."""
        block = {"type": "section", "text": {"type": "mrkdwn", "text": text}}
        self._call("chat.update", channel=channel, ts=ts, text=text, blocks=[block])

    def ask_reason(self, trigger_id: str, nid: str) -> None:
        """Opens the modal asking why the request is denied."""
        view = {
            "type": "modal",
            "callback_id": DENY_VIEW,
            "private_metadata": nid,
            "title": {"type": "plain_text", "text": "Deny"},
            "submit": {"type": "plain_text", "text": "Deny"},
            "blocks": [
                {
                    "type": "input",
                    "block_id": REASON_BLOCK,
                    "label": {"type": "plain_text", "text": "Why? The agent is told."},
                    "element": {"type": "plain_text_input", "action_id": REASON_BLOCK},
                }
            ],
        }
        self._call("views.open", trigger_id=trigger_id, view=view)

    def _call(self, method: str, **body: Any) -> dict[str, Any]:
        try:
            answer = self.http.post(f"{self.base}/{method}", json=body)
            found: dict[str, Any] = answer.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ProviderError(f"slack {method}: {exc.__class__.__name__}: {exc}") from exc
        if not found.get("ok"):
            raise ProviderError(f"slack {method}: {found.get('error', answer.status_code)}")
        return found

    def close(self) -> None:
        self.http.close()
