"""The scheduler of `signoff beat`: Celery's in-memory one, except that it sweeps itself.

Sending the sweep as a task would make expiry wait for a worker to take it; run here,
an overdue approval expires on time with no worker at all, and the `advance` the sweep
sends for it waits in the queue until a worker comes. It also fires the operators'
schedules, on a thread of its own (`worker/schedules/firer.py`), so a long sweep never
delays a fire, and archives conversations past their retention on another
(`worker/archiving.py`). With a broker apart from the state Redis it relays the outbox too
(`worker/relay.py`), so a schedule's fire reaches the broker with no worker running.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery.beat import ScheduleEntry, Scheduler

from shared.archive.archiver import Archiver
from shared.client.tasks import SWEEP
from shared.errors import SignoffError
from worker.archiving import ArchiveThread
from worker.relay import RelayThread
from worker.schedules.firer import ScheduleFirer
from worker.schedules.runs import ScheduleRunner

__all__ = ["SweepingScheduler"]

log = logging.getLogger(__name__)

_STOPS = (signal.SIGTERM, signal.SIGINT)


class SweepingScheduler(Scheduler):
    """Runs the sweep entry in this process; any other entry is sent as usual."""

    firer: ScheduleFirer | None = None
    relay: RelayThread | None = None
    archiver: ArchiveThread | None = None

    def setup_schedule(self) -> None:
        super().setup_schedule()
        runtime = self.app.signoff_runtime
        self.firer = ScheduleFirer(
            ScheduleRunner(runtime.stores, runtime.send_advance, runtime.queue_advance)
        )
        self.firer.start()
        archiver = Archiver(runtime.client, runtime.keys, runtime.settings)
        self.archiver = ArchiveThread(archiver, runtime.settings.archive_interval_s).start()
        make_relay = getattr(self.app, "signoff_relay", None)  # a broker apart (worker/relay.py)
        if make_relay is not None:
            self.relay = RelayThread(make_relay()).start()

    def close(self) -> None:
        if self.firer is not None:
            self.firer.stop()
        if self.relay is not None:
            self.relay.stop()
        if self.archiver is not None:
            self.archiver.stop()
        super().close()

    def apply_entry(self, entry: ScheduleEntry, producer: Any = None) -> None:
        if entry.task != SWEEP:
            super().apply_entry(entry, producer=producer)
            return
        try:
            with _stops_held():
                swept = self.app.signoff_runtime.sweep()
        except SignoffError as exc:  # Redis away: the next interval tries again
            log.warning("sweep failed, retried in one interval: %s", exc)
            return
        except Exception:  # a beat that died would expire nothing again: log, go on
            log.exception("sweep failed unexpectedly, retried in one interval")
            return
        counts = {
            "expired": len(swept.expired),
            "restored": len(swept.reconciled.restored),
            "redelivered": len(swept.reconciled.redelivered),
            "dropped": len(swept.reconciled.dropped),
            "reaudited": len(swept.reconciled.reaudited),
            "resent": len(swept.resent),
        }
        log.log(
            logging.INFO if any(counts.values()) else logging.DEBUG,
            "sweep: %s",
            ", ".join(f"{count} {what}" for what, count in counts.items()),
        )


@contextmanager
def _stops_held() -> Iterator[None]:
    """Holds SIGTERM and SIGINT until the block ends: a stop never cuts a resolution in two.

    Stopping beat between an expiry's compare-and-set and its clean-up would leave the
    clean-up to the next sweep's reconciler; the sweep is bounded, so waiting costs little.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {stop: signal.signal(stop, lambda signum, _: held.append(signum)) for stop in _STOPS}
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler if handler is not None else signal.SIG_DFL)
        if held:
            signal.raise_signal(held[0])
