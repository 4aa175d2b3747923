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
from dataclasses import dataclass
from typing import Protocol

from shared.errors import Conflict, InvalidInput, NotFound
from shared.models.notifications import Allow, Notification, Resolution
from shared.store.notifications import NotificationStore

__all__ = [
    "BULK_LIMIT",
    "BulkOutcome",
    "BulkScope",
    "PendingFilter",
    "PendingSelection",
    "check_decision",
    "resolve_matching",
]

BULK_LIMIT = 10_000
_PAGE = 500


class PendingSelection(Protocol):
    """Which pending notifications a bulk action means (the web's `InboxFilter`, or ours)."""

    @property
    def min_age_s(self) -> float | None: ...

    def count(self, store: NotificationStore, *, min_age_s: float | None = None) -> int: ...

    def page(
        self, store: NotificationStore, *, offset: int, limit: int, min_age_s: float | None = None
    ) -> list[Notification]: ...


@dataclass(frozen=True)
class PendingFilter:
    """Pending notifications of a tool, a batch, a conversation; none set means every one."""

    tool: str | None = None
    batch_id: str | None = None
    conversation_id: str | None = None
    min_age_s: float | None = None

    def count(self, store: NotificationStore, *, min_age_s: float | None = None) -> int:
        """How many pending notifications match every filter."""
        return store.count_pending(
            tool=self.tool,
            batch_id=self.batch_id,
            conversation_id=self.conversation_id,
            min_age_s=self.min_age_s if min_age_s is None else min_age_s,
        )

    def page(
        self, store: NotificationStore, *, offset: int, limit: int, min_age_s: float | None = None
    ) -> list[Notification]:
        """One page, oldest first."""
        return store.pending(
            tool=self.tool,
            batch_id=self.batch_id,
            conversation_id=self.conversation_id,
            min_age_s=self.min_age_s if min_age_s is None else min_age_s,
            offset=offset,
            limit=limit,
        )


@dataclass(frozen=True)
class BulkScope:
    """A selection pinned to the notifications created up to `created_before` (epoch s)."""

    inbox: PendingSelection
    created_before: float

    @classmethod
    def pin(cls, inbox: PendingSelection, *, created_before: float | None = None) -> BulkScope:
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


def resolve_matching(
    store: NotificationStore,
    scope: BulkScope,
    decision: Resolution,
    *,
    expected: int,
    actor: str,
) -> BulkOutcome:
    """Resolves the `expected` matching notifications one by one; the caller checked the count."""
    check_decision(decision)
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
