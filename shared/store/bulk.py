"""Bulk resolution: every pending notification an explicit filter matches, as counted.

A caller first counts what a filter matches, shows that count, then confirms with it.
The filter is pinned to the notifications created up to the moment the count was taken
(`created_before`), so a notification that arrives later is never touched; if the count
differs when the action runs, nothing is resolved (`count_changed`). Each notification
then goes through `NotificationStore.resolve`, so each is validated, compare-and-set and
audited on its own; one settled by someone else in between is counted as a conflict.
Shared by the web's bulk pages and API and by `signoff approvals allow|deny --batch`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from shared.errors import Conflict, CorruptRecord, Forbidden, InvalidInput, NotFound
from shared.models.notifications import Allow, Notification, Resolution
from shared.models.pending import PendingFilter
from shared.store.notifications import Check, NotificationStore

__all__ = [
    "BULK_LIMIT",
    "BulkOutcome",
    "BulkScope",
    "CountChanged",
    "TooMany",
    "check_decision",
    "counted",
    "resolve_matching",
]

BULK_LIMIT = 10_000
_PAGE = 500


class CountChanged(Conflict):
    """Raised when the matching count is not the count the caller confirmed; nothing changed."""

    code = "count_changed"

    def __init__(self, expected: int, current: int, created_before: float) -> None:
        super().__init__(expected, current, created_before)
        self.expected = expected
        self.current = current
        self.created_before = created_before

    @property
    def message(self) -> str:
        return (
            f"{self.current} pending notifications match now, not the {self.expected} "
            "confirmed; nothing was resolved: confirm the new count"
        )


class TooMany(InvalidInput):
    """Raised when a filter matches more notifications than one bulk action resolves."""

    code = "too_many"

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count

    @property
    def message(self) -> str:
        return (
            f"{self.count} notifications match; a bulk action resolves at most {BULK_LIMIT:,}: "
            "narrow the filter"
        )


@dataclass(frozen=True)
class BulkScope:
    """A filter pinned to the notifications created up to `created_before` (epoch s).

    `on_corrupt` is told of a matching record that does not parse, which is then left out;
    without it, such a record raises `CorruptRecord`.
    """

    inbox: PendingFilter
    created_before: float
    on_corrupt: Callable[[CorruptRecord], None] | None = None

    @classmethod
    def pin(
        cls,
        inbox: PendingFilter,
        *,
        created_before: float | None = None,
        on_corrupt: Callable[[CorruptRecord], None] | None = None,
    ) -> BulkScope:
        """Now (minus the filter's minimum age), or `created_before` if that is earlier."""
        cutoff = time.time() - (inbox.min_age_s or 0)
        if created_before is not None:
            cutoff = min(cutoff, created_before)
        return cls(inbox, cutoff, on_corrupt)

    def _pinned(self) -> PendingFilter:
        return self.inbox.aged(max(time.time() - self.created_before, 0.0))

    def count(self, store: NotificationStore) -> int:
        """How many pending notifications match every filter."""
        return store.count_pending(self._pinned())

    def notes(self, store: NotificationStore, *, limit: int) -> list[Notification]:
        """The matching notifications, oldest first, at most `limit`, read a page at a time."""
        window = store.count_pending(self._pinned())
        size = max(min(_PAGE, limit), 1)
        found: dict[str, Notification] = {}
        for offset in range(0, window, size):
            ids = store.pending_ids(self._pinned(), offset=offset, limit=size)
            for note in store.load(ids, on_corrupt=self.on_corrupt):
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


def counted(store: NotificationStore, scope: BulkScope) -> int:
    """How many notifications `scope` matches; TooMany past what one action resolves."""
    count = scope.count(store)
    if count > BULK_LIMIT:
        raise TooMany(count)
    return count


def check_decision(decision: Resolution) -> Resolution:
    """Bulk actions allow or deny; edited arguments belong to one call, not to many."""
    if isinstance(decision, Allow) and decision.arguments is not None:
        raise InvalidInput("a bulk allow cannot edit arguments; allow calls one by one for that")
    if decision.kind not in ("allow", "deny"):
        raise InvalidInput("a bulk action allows or denies; answer questions one by one")
    return decision


def resolve_matching(
    store: NotificationStore,
    scope: BulkScope,
    decision: Resolution,
    *,
    expected: int,
    actor: str,
    check: Check | None = None,
    audit_scope: str = "",
) -> BulkOutcome:
    """Resolves the `expected` matching notifications one by one, if that is still the count.

    CountChanged when it is not, TooMany when it is more than one action resolves; with
    `check` (the caller's right to resolve), Forbidden when it refuses any matching one;
    nothing is resolved then.
    """
    check_decision(decision)
    current = scope.count(store)
    if current != expected:
        raise CountChanged(expected, current, scope.created_before)
    if current > BULK_LIMIT:
        raise TooMany(current)
    notes = scope.notes(store, limit=expected)
    if check is not None:
        _check_all(notes, check)
    outcome = BulkOutcome(matched=expected, left_pending=expected - len(notes))
    for note in notes:
        try:
            store.resolve(note.id, decision, actor=actor, check=check, audit_scope=audit_scope)
        except (Conflict, NotFound):
            outcome.conflicts += 1
        except (InvalidInput, Forbidden):
            outcome.not_applicable += 1
        else:
            outcome.resolved += 1
    return outcome


def _check_all(notes: list[Notification], check: Check) -> None:
    """Forbidden, naming the first and how many, if `check` refuses any of `notes`."""
    refused: list[Forbidden] = []
    for note in notes:
        try:
            check(note)
        except Forbidden as exc:
            refused.append(exc)
    if refused:
        raise Forbidden(
            f"{len(refused)} of the {len(notes)} matching notifications are not the caller's "
            f"to resolve ({refused[0].message}); nothing was resolved: narrow the filter"
        )
