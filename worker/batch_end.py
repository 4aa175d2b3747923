"""Telling webhooks that a batch finished, from the flush that ended its last item.

The batch's transition script marks it done; the worker that ended an item reads the
status after its own transition, so whichever item ended last sees it. Two items ending
together may both see it: the event's id is the batch's, so it is delivered once.
"""

from __future__ import annotations

from shared.models.webhooks import WebhookEventKind
from shared.store.batches import BatchStatus, BatchStore
from shared.store.connection import storage_errors
from shared.store.webhooks import emit_webhook_event
from shared.webhooks.payloads import batch_finished
from worker.batch_hooks import on_batch_flush
from worker.flush import Flush
from worker.leg import Leg

__all__ = ["on_batch_item_flush"]


def on_batch_item_flush(store: BatchStore, leg: Leg, flush: Flush) -> None:
    """The batch's own hook, then the webhook event if this flush finished the batch."""
    on_batch_flush(store, leg, flush)
    bid = leg.config.batch_id
    if bid is None or flush.end is None:
        return
    keys = store.keys
    with storage_errors(f"reading batch {bid}"), store.client.pipeline(False) as pipe:
        pipe.hget(keys.batch(bid), "status")
        pipe.exists(keys.webhook_endpoints())
        status, endpoints = pipe.execute()
    if status != BatchStatus.DONE.value or not endpoints:
        return
    info = store.info(bid)
    counts = {state.value: count for state, count in info.counts.items()}
    event = batch_finished(bid, {"total": info.total, **counts})
    emit_webhook_event(
        store.client, keys, WebhookEventKind.BATCH_FINISHED, event.data, event_id=event.event_id
    )
