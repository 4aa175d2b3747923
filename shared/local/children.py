"""Child processes that cannot outlive their parent, for `signoff up` and the embedded Redis.

Two mechanisms, because each covers what the other cannot:

- a parent-death signal (Linux `prctl(PR_SET_PDEATHSIG)`, asked for between fork and exec):
  the kernel kills the child when its parent dies, even by SIGKILL;
- one process group that the parent owns: a Ctrl-C at the terminal reaches only the parent
  (which then stops its children in order), and `killpg` ends the children's own children
  (gunicorn's workers) that a parent-death signal does not reach.

The group's leader is a `sleep` that nothing else uses and that is reaped last: while it is
unreaped, the group id cannot be given to another process, so the final `killpg` can only
reach this group.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Child", "ProcessGroup", "die_with_parent"]

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_LEADER = ["sleep", "2147483647"]


def die_with_parent(signum: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A `preexec_fn` by which the child gets `signum` when this thread dies; None off Linux.

    Popen from the main thread: the signal follows the thread that forked, not the process.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before the fork, not in the child
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), signum)

    return preexec


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log: Path | None = None

    def log_tail(self, limit: int = 2000) -> str:
        """The last `limit` bytes of its log, read without reading the rest."""
        if self.log is None or not self.log.exists():
            return ""
        with self.log.open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - limit))
            return log.read().decode(errors="replace")


class ProcessGroup:
    """Children in one process group of their own, each dying with this process."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self._leader: subprocess.Popen[bytes] | None = None

    @property
    def pgid(self) -> int | None:
        return None if self._leader is None else self._leader.pid

    def spawn(
        self, name: str, command: list[str], *, env: dict[str, str], log: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Starts `command` in the group, its output appended to `log` (or discarded)."""
        pgid = self._ensure_leader(env)
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(log.open("ab")) if log else subprocess.DEVNULL
            process = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,  # a background group must not read the terminal
                stdout=out,
                stderr=subprocess.STDOUT,
                process_group=pgid,
                preexec_fn=die_with_parent(),
            )
        self.children.append(Child(name, process, log))
        return process

    def _ensure_leader(self, env: dict[str, str]) -> int:
        if self._leader is None:
            self._leader = subprocess.Popen(
                _LEADER,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                process_group=0,
                preexec_fn=die_with_parent(),
            )
        return self._leader.pid

    def exited(self) -> Child | None:
        """The first child that has exited, if any (reaped: its status is kept)."""
        return next((c for c in self.children if c.process.poll() is not None), None)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM to each child, last started first; SIGKILL to what lingers, then the group."""
        for child in reversed(self.children):
            _terminate(child.process, timeout_s)
        if self._leader is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._leader.pid, signal.SIGKILL)  # stragglers: the children's children
            self._leader.wait()  # reaped last: until now the group id was still ours
            self._leader = None
        self.children.clear()


def _terminate(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
