"""A question to a person while a tool call is still running (an MCP server's input request).

The call cannot park: the server holds it open. So the question is filed in the inbox like
any approval (a notification with the requested schema: Submit, validated, or Deny), and the
leg waits for it at most `wait_s`, then expires it. The leg's thread is held meanwhile; that
is the price of a server that asks inside a live call, and why the wait is bounded.
"""

from __future__ import annotations

import time
from typing import Any

from shared.errors import SignoffError
from shared.models.notifications import (
    Notification,
    NotificationStatus,
    Resolution,
)
from shared.models.steps import ToolCall
from shared.schema import check_schema
from worker.approval import file_notification, question_note
from worker.leg import Leg

__all__ = ["LiveQuestion"]

_POLL_S = 0.2


class LiveQuestion:
    """Asks the operators on behalf of one running call of one leg."""

    def __init__(self, leg: Leg, call: ToolCall) -> None:
        self.leg = leg
        self.call = call
        self._asked = 0

    def ask(
        self, title: str, question: str, schema: dict[str, Any], wait_s: float
    ) -> Resolution | None:
        """The person's resolution (Submit or Deny), or None when it expired unanswered.

        InvalidInput when the schema is not one a person can be asked to fill in.
        """
        check_schema(schema, name="requested schema")
        note = self._notification(title, question, schema, wait_s)
        file_notification(self.leg, note)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            found = self.leg.notifications.get(note.id)
            if found.status is not NotificationStatus.PENDING:
                return found.resolution if found.status is NotificationStatus.RESOLVED else None
            time.sleep(_POLL_S)
        return self._expired(note.id)

    def _expired(self, nid: str) -> Resolution | None:
        """Expires the question (Redis's clock decides the deadline: retried until it agrees);
        a resolution that came first wins."""
        for _ in range(50):
            try:
                if self.leg.notifications.expire(nid):
                    return None
            except SignoffError:
                pass
            found = self.leg.notifications.get(nid)
            if found.status is not NotificationStatus.PENDING:
                return found.resolution if found.status is NotificationStatus.RESOLVED else None
            time.sleep(_POLL_S / 4)
        return None

    def _notification(
        self, title: str, question: str, schema: dict[str, Any], wait_s: float
    ) -> Notification:
        leg, now = self.leg, time.time()
        self._asked += 1
        suffix = f"{leg.turn_id[:8]}q{self._asked:02d}{int(now * 1000) % 100_000:05d}"
        return question_note(
            leg, self.call, title=title, question=question, schema=schema, wait_s=wait_s,
            suffix=suffix,
        )  # fmt: skip
