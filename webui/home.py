"""What the home page shows: what needs a person now, batches under way, recent failures.

Pending requests are grouped by batch and tool from the oldest `GROUP_SAMPLE` (the groups
an operator sees first); each group's count is then exact, from the inbox's indexes (all in
one round trip).
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.models.batches import BatchStatus
from shared.models.notifications import Notification
from shared.store.conversations import ConversationRecord, ConversationStore
from webui.api.models import BatchSummary
from webui.batches.overview import batch_page
from webui.listing import ConversationFilter, ListedStatus, scan
from webui.services import Services
from webui.unreadable import skip_unreadable

__all__ = ["HomeView", "PendingGroup", "home_view"]

GROUP_SAMPLE = 500
GROUPS_SHOWN = 12
BATCHES_READ = 50
FAILURES_SHOWN = 10


@dataclass(frozen=True)
class PendingGroup:
    batch_id: str | None
    tool: str | None
    count: int
    oldest: float

    def query(self) -> dict[str, str]:
        """The inbox filters that show this group."""
        return {name: v for name, v in (("batch_id", self.batch_id), ("tool", self.tool)) if v}


@dataclass(frozen=True)
class HomeView:
    pending_total: int
    groups: list[PendingGroup]
    running: list[BatchSummary]
    failures: list[ConversationRecord]  # newest first


def _groups(svc: Services) -> list[PendingGroup]:
    store = svc.notifications
    notes = store.load(store.pending_ids(limit=GROUP_SAMPLE), on_corrupt=skip_unreadable)
    oldest: dict[tuple[str | None, str | None], float] = {}
    for note in notes:  # oldest first: the first seen of a group is its oldest
        oldest.setdefault((note.batch_id, note.tool_name), note.created_at)
    shown = list(oldest.items())[:GROUPS_SHOWN]
    in_batches = [group for group, _ in shown if group[0] is not None]
    exact = dict(zip(in_batches, store.count_pending_each(in_batches), strict=True))
    return [
        PendingGroup(bid, tool, exact[bid, tool], at)
        if bid is not None
        else PendingGroup(None, tool, _count_outside_batches(notes, tool), at)
        for (bid, tool), at in shown
    ]


def _count_outside_batches(notes: list[Notification], tool: str | None) -> int:
    """Requests of no batch cannot be counted by index (none is kept): counted in the sample."""
    return sum(1 for note in notes if note.batch_id is None and note.tool_name == tool)


def home_view(svc: Services) -> HomeView:
    batches = batch_page(svc, offset=0, limit=BATCHES_READ).items
    return HomeView(
        pending_total=svc.notifications.count_pending(),
        groups=_groups(svc),
        running=[b for b in batches if b.status in (BatchStatus.RUNNING, BatchStatus.SUBMITTING)],
        failures=_failures(svc.store),
    )


def _failures(store: ConversationStore) -> list[ConversationRecord]:
    """The conversations whose turns failed most recently and that have not run since."""
    where = ConversationFilter(ListedStatus.FAILED)
    return scan(store, where, wanted=FAILURES_SHOWN, ids=store.failed_ids)[0][:FAILURES_SHOWN]
