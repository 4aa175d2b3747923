"""Batches as the API and the pages show them: one in detail, or a page of them, newest first."""

from __future__ import annotations

from webui.api.models import BatchDetail, BatchList, BatchSummary
from webui.services import Services
from webui.unreadable import skip_unreadable

__all__ = ["batch_detail", "batch_page"]


def batch_detail(svc: Services, bid: str) -> BatchDetail:
    info = svc.batches.info(bid)
    return BatchDetail.of(info, svc.notifications.count_pending(batch_id=bid))


def batch_page(svc: Services, *, offset: int, limit: int) -> BatchList:
    """A page of batches, newest first (one more id is read to know whether more follow).

    A batch whose record does not parse is left out (and logged), not allowed to fail the page.
    """
    ids = svc.batches.ids(offset=offset, limit=limit + 1)
    infos = svc.batches.infos(ids[:limit], on_corrupt=skip_unreadable)
    pending = svc.notifications.count_pending_each([(info.batch_id, None) for info in infos])
    items = [BatchSummary.of(info, count) for info, count in zip(infos, pending, strict=True)]
    more = len(ids) > limit
    return BatchList(
        items=items, offset=offset, limit=limit, next_offset=offset + limit if more else None
    )
