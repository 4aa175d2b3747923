"""Bulk approvals over HTTP: the store's count check answered as 409 and 422.

The pinned scope, the checks, the outcome and the one-by-one resolution live in
`shared/store/bulk.py`, which the CLI uses too; here its errors become the web's answers.
"""

from __future__ import annotations

from shared.approvers import ResolveCheck
from shared.models.notifications import Resolution
from shared.models.pending import PendingFilter
from shared.store import bulk
from shared.store.bulk import BULK_LIMIT, BulkOutcome, BulkScope, resolve_matching
from shared.store.notifications import NotificationStore
from webui.errors import HttpProblem
from webui.unreadable import skip_unreadable

__all__ = ["BULK_LIMIT", "BulkOutcome", "BulkScope", "CountChanged", "apply", "scope_of"]


class CountChanged(HttpProblem):
    """The 409 of a count that is not the one the caller confirmed; nothing changed."""

    def __init__(self, error: bulk.CountChanged) -> None:
        super().__init__(
            409,
            error.code,
            error.message,
            details=[{"current_count": error.current, "created_before": error.created_before}],
        )
        self.expected = error.expected
        self.current = error.current


def scope_of(inbox: PendingFilter, *, created_before: float | None = None) -> BulkScope:
    """The filter pinned now (or at `created_before`); unreadable records are logged, left out."""
    return BulkScope.pin(inbox, created_before=created_before, on_corrupt=skip_unreadable)


def apply(
    store: NotificationStore,
    scope: BulkScope,
    decision: Resolution,
    *,
    expected: int,
    actor: str,
    check: ResolveCheck | None = None,
) -> BulkOutcome:
    """Resolves every matching notification, if `expected` is still the count; with `check`,
    only if the caller may resolve every one (403 otherwise, nothing resolved)."""
    try:
        return resolve_matching(
            store,
            scope,
            decision,
            expected=expected,
            actor=actor,
            check=check,
            audit_scope=check.audit_scope if check is not None else "",
        )
    except bulk.CountChanged as exc:
        raise CountChanged(exc) from None
    except bulk.TooMany as exc:
        raise HttpProblem(422, exc.code, exc.message) from None
