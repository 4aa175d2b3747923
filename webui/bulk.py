"""Bulk approvals over HTTP: the count check's answers (409, 422) around `shared.store.bulk`.

The pinned scope, the outcome and the one-by-one resolution live in `shared/store/bulk.py`, which
the CLI uses too; here the count check answers as the web and the API do.
"""

from __future__ import annotations

from shared.models.notifications import Resolution
from shared.store.bulk import (
    BULK_LIMIT,
    BulkOutcome,
    BulkScope,
    check_decision,
    resolve_matching,
)
from shared.store.notifications import NotificationStore
from webui.errors import HttpProblem

__all__ = ["BULK_LIMIT", "BulkOutcome", "BulkScope", "CountChanged", "TooMany", "apply"]


class CountChanged(HttpProblem):
    """Raised when the matching count is not the count the caller confirmed; nothing changed."""

    def __init__(self, expected: int, current: int, created_before: float) -> None:
        super().__init__(
            409,
            "count_changed",
            f"{current} pending notifications match now, not the {expected} confirmed; "
            "nothing was resolved: confirm the new count",
            details=[{"current_count": current, "created_before": created_before}],
        )
        self.expected = expected
        self.current = current


class TooMany(HttpProblem):
    """Raised when a filter matches more notifications than one bulk action resolves."""

    def __init__(self, count: int) -> None:
        super().__init__(
            422,
            "too_many",
            f"{count} notifications match; a bulk action resolves at most {BULK_LIMIT:,}: "
            "narrow the filter",
        )


def apply(
    store: NotificationStore,
    scope: BulkScope,
    decision: Resolution,
    *,
    expected: int,
    actor: str,
) -> BulkOutcome:
    """Resolves every matching notification, if `expected` is still the count."""
    check_decision(decision)
    current = scope.count(store)
    if current != expected:
        raise CountChanged(expected, current, scope.created_before)
    if current > BULK_LIMIT:
        raise TooMany(current)
    return resolve_matching(store, scope, decision, expected=expected, actor=actor)
