"""Which turn a follower without a turn id follows, from one transaction's replies."""

from __future__ import annotations

import pytest

from shared.client.follow import current_turn
from shared.errors import Conflict, NotFound


def test_the_running_turn_then_the_next_queued_one() -> None:
    assert current_turn("c", 1, "t-running", "t-queued") == "t-running"
    assert current_turn("c", 1, "", "t-queued") == "t-queued"
    assert current_turn("c", 1, None, "t-queued") == "t-queued"


def test_neither_is_a_conflict_and_no_conversation_is_not_found() -> None:
    with pytest.raises(Conflict, match="no running or queued turn"):
        current_turn("c", 1, "", None)
    with pytest.raises(NotFound, match="c does not exist"):
        current_turn("c", 0, None, None)
