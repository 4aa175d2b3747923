"""The approvals inbox filter: the shared `PendingFilter`, read from a request.

One filter object serves the inbox page, the JSON listing and bulk actions, so the
count an operator is shown and the notifications an action touches are chosen the
same way. Every facet is optional; an empty value means unset.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Protocol, Self

from pydantic import AliasChoices, Field, PrivateAttr

from shared.models.notifications import Notification
from shared.models.pending import PendingFilter
from shared.store.notifications import NotificationStore
from webui.params import STRIPPED, ChoiceParam, NumberParam, QueryModel
from webui.unreadable import skip_unreadable

__all__ = [
    "AGE_CHOICES",
    "MAX_AGE_S",
    "MINE_SCAN",
    "InboxFilter",
    "InboxPage",
    "InboxView",
    "MayResolve",
    "matches_search",
]

# The inbox's "waiting for at least" choices, in seconds (any value works in a URL).
AGE_CHOICES: tuple[tuple[int, str], ...] = (
    (60, "1 minute"),
    (600, "10 minutes"),
    (3600, "1 hour"),
    (86_400, "1 day"),
)
MAX_AGE_S = 10 * 366 * 86_400  # ten years: nothing waits longer

Facet = Annotated[str | None, STRIPPED]
# Pending notifications a view no index serves ("mine", "claimed", a search) reads at most,
# oldest first: no query string makes a page read everything.
MINE_SCAN = 2_000
MAX_SEARCH_CHARS = 200


@dataclass(frozen=True)
class InboxPage:
    """A page of the inbox, how many match, and whether only the oldest `MINE_SCAN` pending
    were examined (a view or a search over more)."""

    notes: list[Notification]
    count: int
    partial: bool = False


class InboxView(str, Enum):
    """Whose requests: every pending one, those the caller may resolve, or those it claimed."""

    ALL = "all"
    MINE = "mine"
    CLAIMED = "claimed"


class MayResolve(Protocol):
    """Whether the caller may resolve a notification, and who it is
    (`shared.approvers.ResolveCheck`)."""

    @property
    def identity(self) -> str: ...

    def allows(self, note: Notification) -> bool: ...


def matches_search(note: Notification, text: str) -> bool:
    """Whether `text` is in the tool's name or its arguments as JSON (or the question), any
    case."""
    wanted = text.casefold()
    call = note.tool_call
    haystack = [note.question or ""]
    if call is not None:
        haystack += [call.name, json.dumps(call.args, ensure_ascii=False, sort_keys=True)]
    return any(wanted in part.casefold() for part in haystack)


class InboxFilter(QueryModel, PendingFilter):
    """A `PendingFilter` read with `of()` from a query string or a form, passed whole to the
    stores; ``batch`` also means ``batch_id`` (the CLI links it)."""

    tool: Facet = Field(None, description="Only calls of this tool.")
    batch_id: Facet = Field(
        None,
        validation_alias=AliasChoices("batch_id", "batch"),
        description="Only this batch's notifications (`batch` also works).",
    )
    conversation_id: Facet = Field(None, description="Only this conversation's notifications.")
    min_age_s: Annotated[NumberParam | None, STRIPPED] = Field(
        None, ge=0, le=MAX_AGE_S, description="Only those waiting this long or more."
    )
    view: ChoiceParam[InboxView] | None = Field(
        None,
        description="`mine`: only those the caller may resolve (its role and approver scopes); "
        "`claimed`: only those the caller claimed. The oldest "
        f"{MINE_SCAN:,} pending that match the facets are examined. Bulk actions take the "
        "facets only.",
    )
    q: Annotated[str | None, STRIPPED] = Field(
        None,
        max_length=MAX_SEARCH_CHARS,
        description="Only those whose tool name or arguments (as JSON) contain this, any case; "
        f"the oldest {MINE_SCAN:,} pending that match the facets are examined.",
    )
    _may: MayResolve | None = PrivateAttr(None)

    @property
    def mine(self) -> bool:
        return self.view is InboxView.MINE

    @property
    def claimed(self) -> bool:
        return self.view is InboxView.CLAIMED

    @property
    def scanned(self) -> bool:
        """Whether a page is read by examining records (a view or a search), not an index."""
        return self.mine or self.claimed or bool(self.q)

    def facets_only(self) -> InboxFilter:
        """The facets and the age, without the view and the search: what bulk actions take."""
        return InboxFilter(**{name: getattr(self, name) for name in PendingFilter.model_fields})

    def of_caller(self, may: MayResolve) -> Self:
        """This filter for a caller: the "mine" view keeps what `may` allows."""
        self._may = may
        return self

    def query(self) -> dict[str, str]:
        """The filters that are set, as query parameters (the view and the search too)."""
        found = super().query()
        if self.view is not None and self.view is not InboxView.ALL:
            found["view"] = self.view.value
        if self.q:
            found["q"] = self.q
        return found

    def describe(self) -> str:
        """The filter in words, for pages and messages."""
        words = [] if not super().query() else [super().describe()]
        if self.q:
            words.append(f"arguments containing {self.q!r}")
        if self.mine:
            words.append("yours to resolve")
        if self.claimed:
            words.append("claimed by you")
        return ", ".join(words) or super().describe()

    def listing(self, store: NotificationStore, *, offset: int, limit: int) -> InboxPage:
        """One page and the count, reading the records once for a view or a search."""
        if not self.scanned:
            page = self.page(store, offset=offset, limit=limit)
            return InboxPage(page, self.count(store))
        kept = self._scan(store)
        partial = store.count_pending(self) > MINE_SCAN
        return InboxPage(kept[offset : offset + limit], len(kept), partial)

    def page(self, store: NotificationStore, *, offset: int, limit: int) -> list[Notification]:
        """One page, oldest first; a notification that does not parse is left out (and logged)."""
        if self.scanned:
            return self._scan(store)[offset : offset + limit]
        ids = store.pending_ids(self, offset=offset, limit=limit)
        return store.load(ids, on_corrupt=skip_unreadable)

    def count(self, store: NotificationStore) -> int:
        """How many pending notifications match every filter (the store intersects facets)."""
        if self.scanned:
            return len(self._scan(store))
        return store.count_pending(self)

    def _scan(self, store: NotificationStore) -> list[Notification]:
        """The oldest `MINE_SCAN` the facets match, kept by the view and the search; a view
        without a caller keeps none."""
        may = self._may
        if (self.mine or self.claimed) and may is None:
            return []
        ids = store.pending_ids(self, offset=0, limit=MINE_SCAN)
        return [n for n in store.load(ids, on_corrupt=skip_unreadable) if self._keeps(n, may)]

    def _keeps(self, note: Notification, may: MayResolve | None) -> bool:
        if self.q and not matches_search(note, self.q):
            return False
        if self.claimed and (may is None or note.claimed_by != may.identity):
            return False
        return not self.mine or (may is not None and may.allows(note))
