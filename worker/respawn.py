"""Keeping Celery workers running: each restarted when it dies on its own, stopped with us.

kombu sometimes ends a worker instead of reconnecting when Redis goes away with tasks in
flight ("Unrecoverable error"). `signoff worker` therefore runs the Celery worker as a
child and starts it again after such an exit, with a growing delay; its work is not lost
(the sweep and Celery's redelivery hand it to the new one). A child that keeps dying at
start (a broken tools module, say) is not restarted forever: after a few quick exits in
a row the parent gives up with the child's exit status.

SIGTERM, SIGINT and SIGHUP are passed to the child once (it runs in its own process
group, so a terminal's Ctrl-C reaches it only through us: a second SIGINT would make
Celery stop cold), and then nothing is restarted. If we are killed, the child gets
SIGKILL from the kernel (a parent-death signal).

Given several commands (the turn worker and the delivery worker), each child is kept by a
thread of its own; when one is given up (or ends cleanly on its own), the others are
stopped too, so that a supervisor sees the exit.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from types import FrameType

from shared.local.children import die_with_parent

__all__ = ["respawn"]

log = logging.getLogger(__name__)

FIRST_DELAY_S = 1.0  # before the first restart; doubles up to MAX_DELAY_S
MAX_DELAY_S = 30.0
QUICK_EXIT_S = 10.0  # a child that lived less than this "died at start"
QUICK_EXITS = 3  # that many in a row: give up
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Keeper:
    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.child: subprocess.Popen[bytes] | None = None
        self.stopping = False

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.stopping = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def stop(self) -> None:
        """Stops the child (SIGTERM) and restarts nothing; once."""
        if not self.stopping:
            self.on_signal(signal.SIGTERM, None)

    def run_once(self) -> tuple[int, float]:
        """Starts the child and waits for it; returns its exit status and how long it lived."""
        started = time.monotonic()
        self.child = subprocess.Popen(self.command, preexec_fn=die_with_parent(), process_group=0)
        code = self.child.wait()
        return code, time.monotonic() - started


def respawn(*commands: list[str]) -> int:
    """Runs each command until it exits cleanly or we are asked to stop; returns a status
    (the first that is not 0)."""
    keepers = [_Keeper(command) for command in commands]

    def on_signal(signum: int, frame: FrameType | None) -> None:
        for keeper in keepers:
            keeper.on_signal(signum, frame)

    previous = {signum: signal.signal(signum, on_signal) for signum in _STOPS}
    try:
        return _keep(keepers[0]) if len(keepers) == 1 else _keep_all(keepers)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _keep_all(keepers: list[_Keeper]) -> int:
    """Keeps every child from a thread; once one keeper is done, stops the others."""
    codes: list[int] = []

    def keep(keeper: _Keeper) -> None:
        codes.append(_keep(keeper))

    threads = [threading.Thread(target=keep, args=(k,), daemon=True) for k in keepers]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        if codes:  # one is done: the rest stop with it
            for keeper in keepers:
                keeper.stop()
        for thread in threads:
            thread.join(timeout=0.1)
    return next((code for code in codes if code), 0)


def _keep(keeper: _Keeper) -> int:
    delay, quick = FIRST_DELAY_S, 0
    while True:
        code, lived_s = keeper.run_once()
        if keeper.stopping or code == 0:
            return code
        quick = quick + 1 if lived_s < QUICK_EXIT_S else 0
        if quick >= QUICK_EXITS:
            log.error("the worker exited %d times at start (status %d); giving up", quick, code)
            return code
        if lived_s >= QUICK_EXIT_S:
            delay = FIRST_DELAY_S
        log.warning("the worker stopped on its own (status %d); restarting in %.0f s", code, delay)
        _sleep_unless_stopped(keeper, delay)
        if keeper.stopping:
            return code
        delay = min(delay * 2, MAX_DELAY_S)


def _sleep_unless_stopped(keeper: _Keeper, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not keeper.stopping and time.monotonic() < deadline:
        time.sleep(0.1)
