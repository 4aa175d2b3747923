"""A real stack for one experiment: its own redis-server (AOF), workers, a beat, a web server.

Every process is started from the main thread with a parent-death signal, so none outlives
the suite even when it is SIGKILLed (the signal follows the thread that forked: a process
started from a helper thread would die with the thread). Logs go to the run's directory.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from shared.client import Client
from shared.local.children import die_with_parent
from shared.local.embedded_redis import EmbeddedRedis, free_port
from shared.models.users import Role
from shared.settings import Settings
from shared.store.users import TokenStore

__all__ = ["ROOT", "Service", "Stack", "stack"]

ROOT = Path(__file__).resolve().parent.parent
SIGNOFF = str(Path(sys.executable).with_name("signoff"))
LEASE_TTL_MS = 1500
_READY = {"worker": "ready.", "beat": "beat: Starting..."}
_SWEEP_LINE = re.compile(r"sweep: (\d+ expired(?:, \d+ \w+)*)")


def _durable_popen(command: list[str]) -> subprocess.Popen[bytes]:
    """redis-server with every AOF write fsynced before it answers, dying with this process."""
    return subprocess.Popen(
        [*command, "--appendfsync", "always"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent(),
    )


class Service:
    """One child process (`python -m worker worker|beat`, `signoff web`), restartable."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.command = command
        self.env = env
        self.log_path = log
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._offset = 0  # where this start's output begins in the log

    def start(self) -> Service:
        """Starts the process and returns at once; `wait_ready` waits for it."""
        self._offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent(),
            )
        self.starts += 1
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def exited(self) -> bool:
        """Started, and no longer running (it died, or was killed and not restarted)."""
        return self.process is not None and self.process.poll() is not None

    def ready(self) -> bool:
        """Whether this start has said it is ready (a worker or beat), or is alive (others)."""
        marker = _READY.get(self.name.split("-")[0])
        if marker is None or not self.alive:
            return self.alive
        with self.log_path.open("rb") as log:
            log.seek(self._offset)
            return marker.encode() in log.read()

    def wait_ready(self, timeout_s: float = 60.0) -> Service:
        deadline = time.monotonic() + timeout_s
        while not self.ready():
            if self.exited:
                raise RuntimeError(f"{self.name} exited at start:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready in {timeout_s}s:\n{self.tail()}")
            time.sleep(0.05)
        return self

    def kill(self) -> None:
        """SIGKILL: no clean-up, no acknowledgement, like a machine going away."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if not self.alive:
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def tail(self, limit: int = 3000) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_bytes()[-limit:].decode(errors="replace")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class Stack:
    """A redis-server with AOF (`appendfsync always`) and the processes of one experiment."""

    def __init__(self, name: str, workdir: Path, **env: str) -> None:
        self.name = name
        self.dir = workdir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.redis = EmbeddedRedis(
            data_dir=self.dir / "redis", appendonly=True, popen=_durable_popen
        )
        self.effects = self.dir / "effects.log"
        self.prefix = f"f{uuid.uuid4().hex[:8]}"
        self.extra_env = env
        self.services: list[Service] = []
        self.web_port = 0
        self.token = ""

    # The environment the children and the suite's own client share

    @property
    def env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
        return {
            **base,
            "SIGNOFF_REDIS_URL": self.redis.url,
            "SIGNOFF_KEY_PREFIX": self.prefix,
            "SIGNOFF_LEASE_TTL_MS": str(LEASE_TTL_MS),
            "SIGNOFF_TOOLS_MODULE": "tests.effect_tools",
            "SIGNOFF_TEST_EFFECTS": str(self.effects),
            **self.extra_env,
        }

    def settings(self) -> Settings:
        return Settings(
            redis_url=self.redis.url,
            key_prefix=self.prefix,
            lease_ttl_ms=LEASE_TTL_MS,
            redis_timeout_s=2.0,
        )

    def client(self) -> Client:
        return Client(self.settings())

    # Processes

    def worker(self, name: str, *, concurrency: int) -> Service:
        env = {**self.env, "SIGNOFF_WORKER_CONCURRENCY": str(concurrency)}
        command = [sys.executable, "-m", "worker", "worker", "-n", f"{name}@%h"]
        return self._add(Service(f"worker-{name}", command, env, self.dir / f"{name}.log"))

    def beat(self) -> Service:
        command = [sys.executable, "-m", "worker", "beat"]
        return self._add(Service("beat", command, self.env, self.dir / "beat.log"))

    def web(self) -> Service:
        """`signoff web` (gunicorn, its default workers and threads) on a free port."""
        self.web_port = free_port()
        env = {
            **self.env,
            "SIGNOFF_WEB_PORT": str(self.web_port),
            "SIGNOFF_SECRET_KEY": secrets.token_urlsafe(32),
        }
        return self._add(Service("web", [SIGNOFF, "web"], env, self.dir / "web.log"))

    def _add(self, service: Service) -> Service:
        self.services.append(service)
        return service.start()

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def wait_web(self, service: Service, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if service.exited:
                raise RuntimeError(f"signoff web exited:\n{service.tail()}")
            try:
                if httpx.get(f"{self.web_url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"signoff web did not answer in {timeout_s}s:\n{service.tail()}")

    def operator_token(self, client: Client) -> str:
        """A bearer token with the operator role, for the HTTP experiments."""
        self.token = TokenStore(client.redis, client.keys).create("faults", Role.OPERATOR)
        return self.token

    def revive(self) -> list[str]:
        """Starts again every service that died on its own; returns `<name> (status <n>)`s."""
        dead = [s for s in self.services if s.exited]
        found = []
        for service in dead:
            assert service.process is not None
            found.append(f"{service.name} (status {service.process.returncode})")
            service.start()
        return found

    def sweep_counts(self) -> Counter[str]:
        """What the beat's sweeps did (expired, restored, ..., resent), summed from its log."""
        counts: Counter[str] = Counter()
        for beat in (s for s in self.services if s.name == "beat"):
            for line in _SWEEP_LINE.findall(beat.log()):
                for part in line.split(", "):
                    count, what = part.split(" ", 1)
                    counts[what] += int(count)
        return counts

    def close(self) -> None:
        for service in reversed(self.services):
            service.stop()
        self.redis.stop()


@contextmanager
def stack(name: str, workdir: Path, **env: str) -> Iterator[Stack]:
    """A started Redis and an empty stack, stopped (every process) when the block ends."""
    built = Stack(name, workdir, **env)
    built.redis.start()
    try:
        yield built
    finally:
        built.close()
