"""The approvals inbox filter: which pending notifications a page, a count or a bulk action means.

One filter object serves the inbox page, the JSON listing and bulk actions, so the
count an operator is shown and the notifications an action touches are chosen the
same way. Every facet is optional; an empty value means unset.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AliasChoices, Field

from shared.models.notifications import Notification
from shared.store.notifications import NotificationStore
from webui.params import STRIPPED, NumberParam, QueryModel
from webui.unreadable import skip_unreadable

__all__ = ["AGE_CHOICES", "MAX_AGE_S", "InboxFilter"]

# The inbox's "waiting for at least" choices, in seconds (any value works in a URL).
AGE_CHOICES: tuple[tuple[int, str], ...] = (
    (60, "1 minute"),
    (600, "10 minutes"),
    (3600, "1 hour"),
    (86_400, "1 day"),
)
_FACETS = ("tool", "batch_id", "conversation_id")
MAX_AGE_S = 10 * 366 * 86_400  # ten years: nothing waits longer

Facet = Annotated[str | None, STRIPPED]


def _seconds(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


class InboxFilter(QueryModel):
    """Pending notifications of a tool, a batch, a conversation, waiting at least `min_age_s`.

    Read with `of()` from a query string or a form; ``batch`` also means ``batch_id`` (the CLI
    links it).
    """

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

    @property
    def facets(self) -> int:
        """How many of tool, batch and conversation are set."""
        return sum(1 for name in _FACETS if getattr(self, name))

    def query(self) -> dict[str, str]:
        """The filters that are set, as query parameters."""
        found = {name: str(getattr(self, name)) for name in _FACETS if getattr(self, name)}
        if self.min_age_s is not None:
            found["min_age_s"] = _seconds(self.min_age_s)
        return found

    def describe(self) -> str:
        """The filter in words, for confirmation pages and messages."""
        parts = [f"{name.replace('_id', '')} {getattr(self, name)}" for name in _FACETS]
        chosen = [part for part, name in zip(parts, _FACETS, strict=True) if getattr(self, name)]
        if self.min_age_s:
            chosen.append(f"waiting at least {_seconds(self.min_age_s)} s")
        return ", ".join(chosen) or "every pending notification"

    def page(
        self,
        store: NotificationStore,
        *,
        offset: int,
        limit: int,
        min_age_s: float | None = None,
    ) -> list[Notification]:
        """One page, oldest first; a notification that does not parse is left out (and logged)."""
        ids = store.pending_ids(
            tool=self.tool,
            batch_id=self.batch_id,
            conversation_id=self.conversation_id,
            min_age_s=self.min_age_s if min_age_s is None else min_age_s,
            offset=offset,
            limit=limit,
        )
        return store.load(ids, on_corrupt=skip_unreadable)

    def count(self, store: NotificationStore, *, min_age_s: float | None = None) -> int:
        """How many pending notifications match every filter (the store intersects facets)."""
        return store.count_pending(
            tool=self.tool,
            batch_id=self.batch_id,
            conversation_id=self.conversation_id,
            min_age_s=self.min_age_s if min_age_s is None else min_age_s,
        )
