"""Bulk approvals: resolving every pending notification an explicit filter matches.

An operator first sees how many notifications the filter matches, then confirms
with that count. The filter is pinned to the notifications created up to the moment
the count was taken (`created_before`), so a notification that arrives later is
never touched. If the count differs when the action runs (someone resolved some
meanwhile, or an API caller counted earlier), nothing is resolved and the caller is
asked again with the new count. Each notification then goes through
`NotificationStore.resolve`, so each is validated, compare-and-set and audited on its
own; one settled by someone else in between is counted as a conflict.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shared.errors import Conflict, InvalidInput, NotFound
from shared.models.notifications import Allow, Notification, Resolution
from shared.store.notifications import NotificationStore
from webui.errors import HttpProblem
from webui.inbox import InboxFilter

__all__ = ["BULK_LIMIT", "BulkOutcome", "BulkScope", "CountChanged", "TooMany", "apply"]

BULK_LIMIT = 10_000
_PAGE = 500


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


@dataclass(frozen=True)
class BulkScope:
    """An inbox filter pinned to the notifications created up to `created_before` (epoch s)."""

    inbox: InboxFilter
    created_before: float

    @classmethod
    def pin(cls, inbox: InboxFilter, *, created_before: float | None = None) -> BulkScope:
        """Now (minus the filter's minimum age), or `created_before` if that is earlier."""
        cutoff = time.time() - (inbox.min_age_s or 0)
        if created_before is not None:
            cutoff = min(cutoff, created_before)
        return cls(inbox, cutoff)

    def _age(self) -> float:
        return max(time.time() - self.created_before, 0.0)

    def count(self, store: NotificationStore) -> int:
        """How many pending notifications match every filter."""
        return self.inbox.count(store, min_age_s=self._age())

    def notes(self, store: NotificationStore, *, limit: int) -> list[Notification]:
        """The matching notifications, oldest first, at most `limit`, read a page at a time."""
        window = self.inbox.count(store, min_age_s=self._age())
        size = max(min(_PAGE, limit), 1)
        found: dict[str, Notification] = {}
        for offset in range(0, window, size):
            page = self.inbox.page(store, offset=offset, limit=size, min_age_s=self._age())
            for note in page:
                if note.created_at <= self.created_before:
                    found.setdefault(note.id, note)
            if len(found) >= limit:
                break
        return list(found.values())[:limit]


@dataclass
class BulkOutcome:
    """What a bulk action did with each of the `matched` notifications."""

    matched: int
    resolved: int = 0
    conflicts: int = 0  # settled by someone else (or expired) in between
    not_applicable: int = 0  # this kind of resolution is not allowed for it
    left_pending: int = 0  # counted, then not found in the listing: moved meanwhile

    def summary(self, verb: str) -> str:
        parts = [f"{verb} {self.resolved} of {self.matched}"]
        if self.conflicts:
            parts.append(f"{self.conflicts} already resolved by someone else")
        if self.not_applicable:
            parts.append(f"{self.not_applicable} skipped: {verb.lower()} is not possible for them")
        if self.left_pending:
            parts.append(f"{self.left_pending} left pending: they moved while the list was read")
        return "; ".join(parts) + "."


def check_decision(decision: Resolution) -> Resolution:
    """Bulk actions allow or deny; edited arguments belong to one call, not to many."""
    if isinstance(decision, Allow) and decision.arguments is not None:
        raise InvalidInput("a bulk allow cannot edit arguments; allow calls one by one for that")
    if decision.kind not in ("allow", "deny"):
        raise InvalidInput("a bulk action allows or denies; answer questions one by one")
    return decision


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
    notes = scope.notes(store, limit=expected)
    outcome = BulkOutcome(matched=expected, left_pending=expected - len(notes))
    for note in notes:
        try:
            store.resolve(note.id, decision, actor=actor)
        except (Conflict, NotFound):
            outcome.conflicts += 1
        except InvalidInput:
            outcome.not_applicable += 1
        else:
            outcome.resolved += 1
    return outcome
