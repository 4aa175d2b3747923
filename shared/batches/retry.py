"""Which of a batch's ended items a retry takes, told from their results. Pure.

An item is `failed` or `cancelled` by its state; one that ended `done` with a tool call
denied is `denied`, and `expired` when a denial was its approval expiring unanswered (an item
may be both). `invalid` items never ran and are not retried: their input is what is wrong.
"""

from __future__ import annotations

from typing import Any

from shared.models.batches import BatchState, RetryFilter, RetryStatus
from shared.models.notifications import EXPIRED_DENIAL

__all__ = ["retry_statuses", "wanted"]


def retry_statuses(result: dict[str, Any]) -> frozenset[RetryStatus]:
    """What a result counts as for a retry; empty for an item that succeeded or still runs."""
    status = result.get("status")
    if status == BatchState.FAILED.value:
        return frozenset({RetryStatus.FAILED})
    if status == BatchState.CANCELLED.value:
        return frozenset({RetryStatus.CANCELLED})
    denials = [str(d) for d in result.get("denials") or ()]
    if status != BatchState.DONE.value or not (denials or result.get("denied")):
        return frozenset()
    expired = sum(denial.startswith(EXPIRED_DENIAL) for denial in denials)
    found = {RetryStatus.EXPIRED} if expired else set()
    if expired < len(denials) or not denials:  # a person denied one (or the reason is unknown)
        found.add(RetryStatus.DENIED)
    return frozenset(found)


def wanted(result: dict[str, Any], chosen: RetryFilter) -> bool:
    """Whether the filter takes this result. A tool is matched among the calls of the turn's
    answer: a failed or cancelled turn left none to read, so a tool filter passes it by."""
    if not retry_statuses(result) & chosen.statuses:
        return False
    if chosen.items is not None and str(result.get("id")) not in chosen.items:
        return False
    if chosen.tool is not None and chosen.tool not in (result.get("tool_calls") or ()):
        return False
    if chosen.error is None:
        return True
    texts = [result.get("error") or "", *(result.get("denials") or ())]
    needle = chosen.error.casefold()
    return any(needle in str(text).casefold() for text in texts)
