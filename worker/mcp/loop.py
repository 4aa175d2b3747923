"""One asyncio loop in a background thread, owning every MCP session of this process.

The worker's legs are greenlets (or threads) of the Celery pool and the MCP SDK is async:
a leg hands its coroutine to this loop and waits for the answer with a limit. The loop starts on
first use, so a forked process starts its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

__all__ = ["BackgroundLoop", "LoopTimeout"]

T = TypeVar("T")


class LoopTimeout(Exception):
    """Raised when a coroutine submitted to the loop does not finish within its limit."""


class BackgroundLoop:
    """A daemon thread running one event loop; `run` is safe to call from any other thread."""

    def __init__(self, name: str = "signoff-mcp") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._loop = asyncio.new_event_loop()
                self._pid = os.getpid()
                thread = threading.Thread(
                    target=self._loop.run_forever, name=self._name, daemon=True
                )
                thread.start()
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], *, timeout_s: float) -> T:
        """The coroutine's result; LoopTimeout (and the coroutine cancelled) after `timeout_s`."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop())
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            if future.done():
                raise  # the coroutine's own timeout (the same class since Python 3.11)
            future.cancel()
            raise LoopTimeout(f"no answer within {timeout_s:g} s") from None

    def stop(self) -> None:
        with self._lock:
            if self._loop is not None and self._pid == os.getpid():
                self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop = None
