"""Starting and stopping Signoff's processes on one machine, for `signoff up`.

Each child runs in its own session, so Ctrl-C reaches only the supervisor, which
stops the children in order (web, scheduler, worker, then Redis) and kills any
that linger: nothing it started outlives it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import click
import redis

from shared.embedded_redis import EmbeddedRedis, free_port
from shared.errors import StorageError
from shared.settings import Settings

__all__ = ["Supervisor"]

STATE_DIR = Path(".signoff")


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


class Supervisor:
    """Owns the processes of a local Signoff."""

    def __init__(
        self, settings: Settings, *, web_port: int | None = None, state_dir: Path = STATE_DIR
    ) -> None:
        self.settings = settings
        self.state_dir = state_dir
        self.web_port = web_port or settings.web_port
        self.redis: EmbeddedRedis | None = None
        self.children: list[Child] = []
        self.env: dict[str, str] = {}
        self.admin_password = settings.admin_password.get_secret_value()

    @property
    def web_url(self) -> str:
        return f"http://{self.settings.web_host}:{self.web_port}"

    @property
    def redis_url(self) -> str:
        return self.env["SIGNOFF_REDIS_URL"]

    def start(self) -> None:
        (self.state_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, **self._child_env()}
        self._spawn("worker", [sys.executable, "-m", "worker", "worker"])
        self._spawn("beat", [sys.executable, "-m", "worker", "beat"])
        from shared.cli.processes import gunicorn_args

        web = self.settings.model_copy(update={"web_port": self.web_port})
        self._spawn("web", [sys.executable, "-m", "gunicorn", *gunicorn_args(web)])
        self._wait_for_web()
        self._announce()

    def _child_env(self) -> dict[str, str]:
        env = {"SIGNOFF_REDIS_URL": self._redis_url(), "SIGNOFF_WEB_PORT": str(self.web_port)}
        if not self.admin_password:
            self.admin_password = secrets.token_urlsafe(12)
            env["SIGNOFF_ADMIN_PASSWORD"] = self.admin_password
        if not self.settings.secret_key.get_secret_value():
            env["SIGNOFF_SECRET_KEY"] = secrets.token_urlsafe(32)  # one for every web worker
        return env

    def _redis_url(self) -> str:
        if _answers(self.settings.redis_url):
            return self.settings.redis_url
        click.echo(f"no Redis answers at {self.settings.redis_url}; starting one")
        self.redis = EmbeddedRedis(
            port=free_port(), data_dir=self.state_dir / "redis", appendonly=True
        )
        self.redis.start()
        return self.redis.url

    def _spawn(self, name: str, command: list[str]) -> None:
        log = self.state_dir / "logs" / f"{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                command, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.children.append(Child(name, process, log))

    def _wait_for_web(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                with urllib.request.urlopen(f"{self.web_url}/healthz", timeout=1) as answer:  # noqa: S310
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise StorageError(f"the web server did not answer at {self.web_url} in {timeout_s:g}s")

    def _announce(self) -> None:
        click.secho(f"Signoff is up: {self.web_url}", fg="green", bold=True)
        click.echo(f"  sign in as {self.settings.admin_user!r} with password {self.admin_password}")
        click.echo(f"  redis: {self.redis_url}   logs: {self.state_dir / 'logs'}")
        click.echo("  the model is the offline demo model unless SIGNOFF_PROVIDER says otherwise")
        click.echo("  Ctrl-C stops everything")

    def check_alive(self) -> None:
        """Raises when a child died: a half-running system is worse than a stopped one."""
        for child in self.children:
            if child.process.poll() is not None:
                tail = child.log.read_text(errors="replace")[-2000:]
                raise StorageError(f"{child.name} exited with {child.process.returncode}:\n{tail}")

    def wait(self) -> None:
        while True:
            self.check_alive()
            time.sleep(0.5)

    def stop(self) -> None:
        for child in reversed(self.children):
            _stop_group(child.process)
        self.children.clear()
        if self.redis is not None:
            self.redis.stop()
            self.redis = None


def _answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def _stop_group(process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # stragglers of the group, e.g. server workers
