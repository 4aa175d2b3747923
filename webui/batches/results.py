"""A page of a batch's results, by the status people see, with links to what waits.

The store reads results in input order only, so a filtered page walks them from the start,
stopping after `SCAN_LIMIT` items: no filter makes a page read a huge batch whole. A waiting
item links to its pending request.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from itertools import islice
from typing import Any

from webui.batches.bar import result_status
from webui.services import Services

__all__ = ["SCAN_LIMIT", "ResultStatus", "ResultsPage", "results_page"]

SCAN_LIMIT = 50_000


class ResultStatus(str, Enum):
    """A result's status as shown: a batch item's state, or `denied` (done with a denial)."""

    DONE = "done"
    DENIED = "denied"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INVALID = "invalid"
    WAITING = "waiting"
    RUNNING = "running"
    QUEUED = "queued"


@dataclass(frozen=True)
class ResultsPage:
    rows: list[
        dict[str, Any]
    ]  # each result (its latest attempt), with `shown` (its status) and `approval`
    more: bool
    truncated: bool  # the filter stopped after SCAN_LIMIT items


def results_page(
    svc: Services, bid: str, *, offset: int, limit: int, status: ResultStatus | None
) -> ResultsPage:
    store = svc.batches
    if status is None:
        found = list(islice(store.results(bid, offset=offset), limit + 1))
        truncated = False
    else:
        matching = (
            r for r in islice(store.results(bid), SCAN_LIMIT) if result_status(r) == status.value
        )
        found = list(islice(matching, offset, offset + limit + 1))
        truncated = len(found) <= limit and store.info(bid).total > SCAN_LIMIT
    rows = found[:limit]
    for row in rows:
        row["shown"] = result_status(row)
        row["approval"] = None
        if row["shown"] == "waiting":
            pending = svc.notifications.pending_ids(conversation_id=row["conversation_id"], limit=1)
            row["approval"] = pending[0] if pending else None
    return ResultsPage(rows=rows, more=len(found) > limit, truncated=truncated)
