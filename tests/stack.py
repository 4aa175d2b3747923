"""What tests share: the `signoff` command run as a process, Celery workers that the tests start,
kill and stop, and settings for a workspace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

from shared.client import Client, Conversation
from shared.models.events import ConversationStatus
from shared.models.notifications import Notification
from shared.settings import Settings
from shared.store.connection import connect
from shared.store.keys import KeySpace

ROOT = Path(__file__).resolve().parent.parent
SIGNOFF = str(Path(sys.executable).with_name("signoff"))  # the venv's `signoff` command


def make_settings(*roots: Path, writable: bool = False, tools_module: str = "") -> Settings:
    """Settings whose workspace is `roots` (read-only unless `writable`)."""
    return Settings(workspace_roots=roots, workspace_writable=writable, tools_module=tools_module)


def run_cli(
    env: dict[str, str], *args: str, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`signoff <args>` as a process of its own, with `env` over this one's, from the repository."""
    return subprocess.run(
        [SIGNOFF, *args],
        env={**os.environ, **env},
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def freeze(pid: int) -> None:
    """SIGSTOP, returning once every thread of `pid` is stopped (the signal reaches them
    asynchronously): from then on the process does nothing until it is killed or continued."""
    os.kill(pid, signal.SIGSTOP)
    tasks = Path(f"/proc/{pid}/task")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        states = [
            (task / "stat").read_text().rpartition(")")[2].split()[0] for task in tasks.iterdir()
        ]
        if all(state in ("T", "t") for state in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} did not stop")


def descendants(pid: int) -> list[int]:
    """Every process under `pid`, deepest first (read from /proc, Linux's thread `children`)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [*descendants(int(child)), int(child)]
    return found


def terminate(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL if the process has not exited in 15 s."""
    if process is None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class WorkerProcess:
    """`python -m worker` as a child process, with its log in a temporary file."""

    def __init__(self, env: dict[str, str], *, concurrency: int = 4, name: str = "w1") -> None:
        self.env = {**os.environ, **env, "SIGNOFF_WORKER_CONCURRENCY": str(concurrency)}
        self.name = name
        self.log_path = Path(tempfile.mkstemp(prefix=f"signoff-{name}-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 90.0) -> WorkerProcess:  # a bound, on a loaded machine
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "worker", "worker", "-n", f"{self.name}@%h"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            self._wait_for("ready.", timeout_s, count=2)  # the turn worker and its deliveries
        except BaseException:
            self.kill()  # a worker that never became ready must not outlive its test
            raise
        return self

    def _wait_for(self, marker: str, timeout_s: float, *, count: int = 1) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.log().count(marker) >= count:
                return
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"worker exited at start:\n{self.log()}")
            time.sleep(0.05)
        raise RuntimeError(f"worker not ready in {timeout_s}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def freeze(self) -> None:
        """Stops the Celery workers as well as `signoff worker` itself: they are its children,
        in process groups of their own, and run the legs."""
        assert self.process is not None
        for pid in [*descendants(self.process.pid), self.process.pid]:
            freeze(pid)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no acknowledgement, like a machine going away."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        terminate(self.process)
        self.process = None


class BeatProcess:
    """`python -m worker beat` (what `signoff beat` runs) as a child, with its log in a file."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = {**os.environ, **env}
        self.log_path = Path(tempfile.mkstemp(prefix="signoff-beat-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 30.0) -> BeatProcess:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "worker", "beat"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        while "beat: Starting..." not in self.log():
            assert self.process.poll() is None, f"beat exited at start:\n{self.log()}"
            assert time.monotonic() < deadline, f"beat not started in {timeout_s}s:\n{self.log()}"
            time.sleep(0.05)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        terminate(self.process)
        self.process = None


def keys_of(client: Client, cid: str) -> list[str]:
    """Every Redis key of one conversation, sorted (found by its prefix)."""
    prefix = client.keys.conversation_prefix(cid)
    return sorted(str(k) for k in client.redis.scan_iter(match=prefix + "*", count=1000))


def effect_prompt(note: str) -> str:
    """A prompt on which the demo model calls `record_effect` (tests/effect_tools.py)."""
    return f'call record_effect {{"note": "{note}"}}'


def parked(
    conversation: Conversation, count: int = 1, timeout_s: float = 20.0
) -> list[Notification]:
    """The conversation's pending notifications once it waits for a person with `count` of them."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = conversation.pending_notifications()
        if len(pending) >= count and conversation.status is ConversationStatus.WAITING_FOR_USER:
            return pending
        time.sleep(0.02)
    raise AssertionError(f"conversation {conversation.conversation_id} did not park")


def members(client: Client, key_of: Callable[[int], str]) -> list[str]:
    """Every member of a sorted set with a copy per state shard (one on one Redis)."""
    return [
        str(m) for key in client.keys.every_shard(key_of) for m in client.redis.zrange(key, 0, -1)
    ]


def lengths_of(client: Client, key_of: Callable[[int], str]) -> int:
    """How many entries a list with a copy per state shard holds in all."""
    return sum(int(client.redis.llen(key)) for key in client.keys.every_shard(key_of))


def state_store(url: str, prefix: str) -> tuple[redis.Redis, KeySpace]:
    """A client of the state Redis at `url` and the key space under `prefix`, as the product
    makes them (a cluster's client and shards when the environment names a cluster)."""
    settings = Settings(redis_url=url, key_prefix=prefix)
    return connect(settings), KeySpace.of(settings)
