"""The worker's garbage collector: the start-up heap left out, and fewer full passes.

A worker process starts with a few hundred megabytes of objects (Celery, the providers'
SDKs, pydantic's models), all alive for good, and with a thousand turns in flight it holds
about a hundred more. Every full collection walked all of it: on `python -m bench latency`
a pass took up to a quarter of a second, stalling every leg (a streamed token seen that much
later), and collections were a tenth of the worker's CPU. `gc.freeze` moves what exists
once the worker is ready into the permanent generation; the young generation's threshold is
raised from 700 to 10,000 allocations, so the older generations, and their long passes,
come round about a tenth as often. What turns allocate is still collected.
"""

from __future__ import annotations

import gc
import logging

__all__ = ["THRESHOLDS", "freeze_startup_heap"]

THRESHOLDS = (10_000, 20, 20)
logger = logging.getLogger(__name__)


def freeze_startup_heap() -> None:
    """Collects the start-up's garbage, then leaves what is alive out of later collections."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    logger.info(
        "garbage collection: %d start-up objects frozen, thresholds %s",
        gc.get_freeze_count(),
        THRESHOLDS,
    )
