"""A Celery bootstep that runs one loop in a thread for as long as the worker runs.

The webhook dispatcher and the route notifier are such loops: each reads a stream in its
own consumer group, so a stop need not wait out a blocking read (what the stopped loop had
not acknowledged is claimed by another worker's).
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar, Protocol

from celery import bootsteps

__all__ = ["Loop", "LoopStep"]


class Loop(Protocol):
    def run(self, stop: threading.Event) -> None: ...


class LoopStep(bootsteps.StartStopStep):
    """Subclasses name their thread and say how the app builds their loop."""

    thread_name: ClassVar[str]
    stop_wait_s: ClassVar[float] = 0.2

    def __init__(self, parent: Any, **options: Any) -> None:
        super().__init__(parent, **options)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def make_loop(self, app: Any) -> Loop:
        raise NotImplementedError

    def start(self, parent: Any) -> None:
        loop = self.make_loop(parent.app)
        self._thread = threading.Thread(
            target=loop.run, args=(self._stop,), name=self.thread_name, daemon=True
        )
        self._thread.start()

    def stop(self, parent: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.stop_wait_s)
