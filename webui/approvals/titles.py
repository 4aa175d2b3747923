"""Requests as the console names them: a title from the chosen arguments, and where they sit.

Every page, row and message says the same words for a request, so a decision can be told
from every other: `Denied send_email to ana@example.com: "Refund" (item 17 of batch ab12cd34)`.
The text is plain; templates escape it (model-derived arguments are untrusted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from flask import g

from shared.errors import StorageError
from shared.models.notifications import Allow, Notification, NotificationStatus
from shared.request_titles import request_title, title_of_call
from webui.services import services

__all__ = [
    "Placed",
    "call_title",
    "chosen_titles",
    "decided",
    "place",
    "selection_decided",
    "tally",
    "title",
]

_SHORT_ID = 8


def chosen_titles() -> Mapping[str, tuple[str, ...]]:
    """The operator's title arguments by tool, read once per request (none if Redis fails:
    the default titles still tell requests apart)."""
    if "title_arguments" not in g:
        try:
            g.title_arguments = services().policies.title_arguments()
        except StorageError:
            g.title_arguments = {}
    found: Mapping[str, tuple[str, ...]] = g.title_arguments
    return found


def title(note: Notification) -> str:
    """What the request would do: `send_email to ana@example.com: "Refund 120 EUR"`."""
    return request_title(note, chosen_titles())


def call_title(tool: str, args: Any) -> str:
    """A call's title from its tool and arguments alone, as the audit log keeps them."""
    shown = args if isinstance(args, Mapping) else {}
    return title_of_call(tool, shown, chosen_titles().get(tool, ()))


def place(note: Notification, item_id: str | None = None) -> str:
    """Where a request sits: "item 17 of batch ab12cd34", "batch ab12cd34" or its conversation."""
    cid = note.conversation_id
    if not note.batch_id:
        return f"conversation {cid if len(cid) <= 12 else cid[:_SHORT_ID] + '…'}"
    batch = f"batch {note.batch_id[:_SHORT_ID]}"
    if not item_id:
        return batch
    item = item_id if item_id.lower().startswith("item") else f"item {item_id}"
    return f"{item} of {batch}"


_VERBS = {"allow": "Allowed", "deny": "Denied", "submit": "Answered"}


def decided(kind: str, note: Notification, item_id: str | None = None) -> str:
    """The message after a decision: the decision, the request, where it sits; for an allow
    that waits for more approvers, how many have allowed."""
    verb = _VERBS.get(kind, kind.capitalize() or "Resolved")
    line = f"{verb} {title(note)} ({place(note, item_id)})"
    if isinstance(note.resolution, Allow) and note.resolution.arguments is not None:
        line += " with edited arguments"
    if note.status is NotificationStatus.PENDING and note.approvals_needed:
        have = len(note.allowed_by)
        line += f": {have} of {note.approvals_needed} approvals, waiting for more"
    return line + "."


class Placed(Protocol):
    """A request and the batch item it belongs to (an inbox row)."""

    @property
    def note(self) -> Notification: ...

    @property
    def item_id(self) -> str | None: ...


def _calls(tool: str | None, count: int) -> str:
    what = f"{tool} call" if tool else "question"
    return f"{count} {what}{'' if count == 1 else 's'}"


def tally(notes: Sequence[Notification]) -> str:
    """What a set of requests would run: "28 send_email calls, 2 calculator calls (batch
    ab12cd34)"."""
    tools = Counter(note.tool_name for note in notes)
    line = ", ".join(_calls(tool, count) for tool, count in tools.most_common())
    batches = sorted({note.batch_id[:_SHORT_ID] for note in notes if note.batch_id})
    if batches:
        more = f" and {len(batches) - 3} more" if len(batches) > 3 else ""
        line += f" (batch{'es' if len(batches) > 1 else ''} {', '.join(batches[:3])}{more})"
    return line


def selection_decided(kind: str, rows: Sequence[Placed], *, gone: int = 0) -> str:
    """The message after deciding a selection: one request by name, several by tool."""
    late = f"; {gone} already resolved" if gone else ""
    if len(rows) == 1:
        return decided(kind, rows[0].note, rows[0].item_id).removesuffix(".") + late + "."
    verb = _VERBS.get(kind, "Resolved")
    what = f": {tally([row.note for row in rows])}" if rows else ""
    return f"{verb} {len(rows)}{what}{late}."
