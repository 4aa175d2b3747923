"""A live-only event (a claim) is framed without an id, so a reader's Last-Event-ID stays."""

from __future__ import annotations

from shared.models.events import ClaimEvent, ConversationStatus, StatusEvent
from webui.live.frames import event_frame


def test_a_live_only_event_has_no_id_line_and_a_stored_one_keeps_its_own() -> None:
    claim = ClaimEvent(conversation_id="c1", notification_id="c1.n", claimed_by="ana")
    assert event_frame(claim) == (
        'event: claim\ndata: {"conversation_id":"c1","turn_id":"","kind":"claim",'
        '"notification_id":"c1.n","claimed_by":"ana"}\n\n'
    )
    stored = StatusEvent(id="5-0", conversation_id="c1", status=ConversationStatus.IDLE)
    assert event_frame(stored).startswith("id: 5-0\nevent: status\n")
