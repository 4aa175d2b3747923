"""The data directory of `signoff up` (`.signoff/` where it runs): what a local Signoff keeps.

up.lock          locked (flock) while an `up` runs on this directory; holds its pid
admin-password   the operator password generated at the first start (0600), shown each start
secret-key       signs sessions and CSRF tokens, so sign-ins survive a restart (0600)
redis/           the embedded Redis: its append-only file, its log and its `port`
demo-batch       the id of the demo batch: the demo runs once per directory
logs/            one log per process
metrics/         each process's metric files while it runs (shared/metrics/runs.py)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from pathlib import Path

from shared.errors import Conflict
from shared.local.embedded_redis import free_port, port_in_use

__all__ = ["StateDir"]


class StateDir:
    """One `.signoff/` directory; `lock` makes it this process's until it exits."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock_fd: int | None = None

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def redis_dir(self) -> Path:
        return self.root / "redis"

    def lock(self) -> None:
        """Claims the directory; raises Conflict naming the `up` that holds it."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        fd = os.open(self.root / "up.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise Conflict(
                f"another `signoff up` (pid {holder}) runs on {self.root}: stop it first, "
                "or start this one in another directory"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd  # closed (and so released) when this process ends, however it ends

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def kept_secret(self, name: str, *, nbytes: int) -> str:
        """The secret in file `name`, made once (0600) and read back on every later start."""
        path = self.root / name
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(nbytes) + "\n")
        path.chmod(0o600)
        return path.read_text().strip()

    def redis_port(self) -> int:
        """The embedded Redis's port of the last start when it is free, so URLs stay valid."""
        path = self.redis_dir / "port"
        with contextlib.suppress(OSError, ValueError):
            port = int(path.read_text())
            if port_in_use("127.0.0.1", port) is None:
                return port
        port = free_port()
        self.redis_dir.mkdir(exist_ok=True)
        path.write_text(f"{port}\n")
        return port

    def demo_batch(self) -> str | None:
        path = self.root / "demo-batch"
        if not path.exists():
            return None
        return path.read_text().strip() or None

    def remember_demo_batch(self, batch_id: str) -> None:
        (self.root / "demo-batch").write_text(f"{batch_id}\n")
