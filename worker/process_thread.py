"""A daemon thread per worker process, started when first needed and again after a fork.

A forked child inherits the parent's objects but not its threads; asking a thread whether it
is alive costs a hub switch under gevent at every call. Keeping the pid it was started in
answers both questions for the price of a `getpid`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable


class ProcessThread:
    """Runs `target` in one daemon thread of the current process, restarting it when it ended."""

    def __init__(self, name: str, target: Callable[[], None], lock: threading.Condition) -> None:
        self._name = name
        self._target = target
        self._lock = lock  # the owner's lock: `ensure_running` is called holding it
        self._pid: int | None = None  # the process whose thread runs, None once it ended

    def ensure_running(self) -> bool:
        """Start the thread unless it runs in this process; True when it was started now."""
        if self._pid == os.getpid():
            return False
        self._pid = os.getpid()
        threading.Thread(target=self._run, name=self._name, daemon=True).start()
        return True

    def _run(self) -> None:
        try:
            self._target()
        finally:
            with self._lock:
                self._pid = None
