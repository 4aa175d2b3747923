"""Telling webhooks that a batch finished, from the flush that ended its last item.

The batch's transition script marks it done; the worker that ended an item asks the
batch store after its own transition, so whichever item ended last sees it. Two items
ending together may both see it: the event's id is the batch's, so it is delivered once.
"""

from __future__ import annotations

from functools import partial

from shared.store.batches import BatchStore
from worker.batches.hooks import on_batch_flush
from worker.flush import Flush
from worker.leg import Leg

__all__ = ["on_batch_item_flush"]


def on_batch_item_flush(store: BatchStore, leg: Leg, flush: Flush) -> None:
    """The batch's own hook, then the webhook event if this flush finished the batch."""
    on_batch_flush(store, leg, flush)
    if leg.config.batch_id is not None and flush.end is not None:
        # after the item's own move, which waits for the lease to be let go
        leg.lease.after_release(partial(store.announce_finished, leg.config.batch_id))
