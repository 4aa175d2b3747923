"""The free-connection queue of a bounded pool: callers served in the order they came.

redis-py's blocking pool keeps its free connections in a `queue.LifoQueue`, whose `get`
lets a newcomer take a connection that was just put back while the caller woken for it
is still on its way: under a burst (a hundred web requests on a few connections) one
caller can lose that race again and again until its wait runs out, and its request
gets a 503 while later ones are served. Here a caller that finds others waiting joins
the line, and each connection put back goes to the head of the line. Connections stay
last in, first out (the warm one is used again), and an idle pool costs nothing more.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from queue import Empty, Full, LifoQueue
from typing import Any

__all__ = ["FairLifoQueue"]


class FairLifoQueue(LifoQueue[Any]):
    """LIFO for the items, first come first served for the callers waiting for one."""

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._line: deque[threading.Condition] = deque()  # waiting callers, oldest first

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        with self.mutex:
            if self._qsize() and not self._line:
                return self._take()
            if not block:
                raise Empty
            turn = threading.Condition(self.mutex)
            self._line.append(turn)
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                while not (self._qsize() and self._line[0] is turn):
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise Empty
                    turn.wait(remaining)
                return self._take()
            finally:
                self._line.remove(turn)
                if self._line and self._qsize():
                    self._line[0].notify()  # what is left goes to the next in line

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        """As `Queue.put`. Nobody waits on `not_empty` here (`get` waits in its line), so a
        put that cannot block (the pool's, giving a connection back) does not notify it:
        under gevent a notify's ownership check costs a lock round of its own."""
        if block:
            super().put(item, block, timeout)
            return
        with self.mutex:
            if 0 < self.maxsize <= self._qsize():
                raise Full
            self._put(item)
            self.unfinished_tasks += 1

    def _take(self) -> Any:
        item = self._get()
        if _waited_on(self.not_full):  # only a blocking put waits, on a full queue
            self.not_full.notify()
        return item

    def _put(self, item: Any) -> None:
        super()._put(item)
        if self._line:
            self._line[0].notify()


def _waited_on(condition: threading.Condition) -> bool:
    """Whether a thread may wait on `condition` (unknown: yes), read under its lock."""
    return bool(getattr(condition, "_waiters", True))
