"""The scheduler's archiver: a thread that runs an archive pass every interval.

It runs in `signoff beat`, beside the sweep and the schedule firer, on a thread of its own,
so a long pass (files written one by one) never delays an expiry or a fire.
"""

from __future__ import annotations

import logging
import threading

from shared.archive.archiver import Archiver
from shared.errors import SignoffError

__all__ = ["ArchiveThread"]

log = logging.getLogger(__name__)


class ArchiveThread:
    """Runs `Archiver.run_pass` every `interval_s` until stopped."""

    def __init__(self, archiver: Archiver, interval_s: float) -> None:
        self.archiver = archiver
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="archiver", daemon=True)

    def start(self) -> ArchiveThread:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                done = self.archiver.run_pass()
            except SignoffError as exc:  # Redis away: the next interval tries again
                log.warning("archive pass failed, retried in one interval: %s", exc)
                continue
            except Exception:  # a dead archiver would let Redis fill: log, go on
                log.exception("archive pass failed unexpectedly, retried in one interval")
                continue
            if done.archived or done.failed or done.audit_trimmed:
                log.info(
                    "archive pass: %d archived, %d failed, %d audit entries trimmed",
                    len(done.archived),
                    len(done.failed),
                    done.audit_trimmed,
                )
