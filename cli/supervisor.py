"""Starting and stopping Signoff's processes on one machine, for `signoff up`.

The supervisor claims its data directory (`.signoff/`, see `state_dir`) and checks that the
web port is free before it starts anything. Then Redis (its own, unless SIGNOFF_REDIS_URL names
one), a worker, the scheduler and the web server start in one process group it owns, each dying
with it even when it is SIGKILLed (`shared/local/children.py`). SIGINT, SIGTERM and SIGHUP
alike stop them in order (web, scheduler, worker, Redis); a child that exits stops the rest
and is named.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import click
import redis

from cli.doctor import redacted
from cli.state_dir import StateDir
from cli.web_server import gunicorn_args
from shared.client.broker import described
from shared.errors import Conflict, SignoffError, StorageError
from shared.local.children import Child, ProcessGroup
from shared.local.embedded_redis import EmbeddedRedis, port_in_use
from shared.settings import Settings

__all__ = ["STOP_SIGNALS", "Stopped", "Supervisor", "stop_on_signals"]

STATE_DIR = Path(".signoff")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):  # a request, like KeyboardInterrupt: no `except Exception`
    """Raised in the main thread by SIGINT, SIGTERM or SIGHUP: stop everything."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signal_name = signal.Signals(signum).name


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise Stopped once; later ones are ignored while stopping.

    SIGINT is set explicitly: a shell starts background jobs with it ignored, and an ignored
    SIGINT is inherited, so Python would not turn it into KeyboardInterrupt.
    """

    def stop(signum: int, frame: FrameType | None) -> None:
        for each in STOP_SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        raise Stopped(signum)

    previous = {each: signal.signal(each, stop) for each in STOP_SIGNALS}
    try:
        yield
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)


class Supervisor:
    """Owns the processes of a local Signoff."""

    def __init__(
        self,
        settings: Settings,
        *,
        web_port: int | None = None,
        state_dir: Path = STATE_DIR,
        redis_url: str | None = None,
    ) -> None:
        self.settings = settings
        self.state = StateDir(state_dir)
        self.web_port = web_port or settings.web_port
        self.shared_redis_url = redis_url  # SIGNOFF_REDIS_URL when set; else Redis is ours
        self.group = ProcessGroup()
        self.redis_url = ""
        self.env: dict[str, str] = {}

    @property
    def web_url(self) -> str:
        return f"http://{self.settings.web_host}:{self.web_port}"

    def start(self) -> None:
        self.state.lock()
        self._check_web_port()
        signal.signal(signal.SIGCHLD, self._on_child_exit)
        self.redis_url = self._redis()
        self.env = {**os.environ, **self._child_env()}
        self._spawn("worker", [sys.executable, "-m", "worker", "worker"])
        self._spawn("beat", [sys.executable, "-m", "worker", "beat"])

        web = self.settings.model_copy(update={"web_port": self.web_port})
        self._spawn("web", [sys.executable, "-m", "gunicorn", *gunicorn_args(web)])
        self._wait_for_web()
        self._announce()

    def _check_web_port(self) -> None:
        host = self.settings.web_host
        reason = port_in_use(host, self.web_port)
        if reason is not None:
            raise Conflict(
                f"the web port {host}:{self.web_port} is taken ({reason}): stop what listens "
                "there, or choose another port with --port or SIGNOFF_WEB_PORT"
            )

    def _redis(self) -> str:
        if self.shared_redis_url is not None:
            if not _answers(self.shared_redis_url):
                raise StorageError(
                    f"SIGNOFF_REDIS_URL: no Redis answers at {redacted(self.shared_redis_url)}; "
                    "start it, or unset SIGNOFF_REDIS_URL to let `signoff up` run its own"
                )
            return self.shared_redis_url
        server = EmbeddedRedis(
            port=self.state.redis_port(),
            data_dir=self.state.redis_dir,
            appendonly=True,
            popen=lambda command: self.group.spawn(
                "redis", command, env=dict(os.environ), log=self.state.redis_dir / "redis.log"
            ),
        )
        return server.start().url

    def _child_env(self) -> dict[str, str]:
        env = {"SIGNOFF_REDIS_URL": self.redis_url, "SIGNOFF_WEB_PORT": str(self.web_port)}
        if not self.settings.admin_password.get_secret_value():
            env["SIGNOFF_ADMIN_PASSWORD"] = self.state.kept_secret("admin-password", nbytes=12)
        if not self.settings.secret_key.get_secret_value():
            # one key for every web worker, and for every start: sign-ins survive a restart
            env["SIGNOFF_SECRET_KEY"] = self.state.kept_secret("secret-key", nbytes=32)
        if not self.settings.metrics_dir:  # each process's run directory under ours
            env["SIGNOFF_METRICS_DIR"] = str(self.state.root / "metrics")
        return env

    def _spawn(self, name: str, command: list[str]) -> None:
        self.group.spawn(name, command, env=self.env, log=self.state.logs / f"{name}.log")

    def _wait_for_web(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                with urllib.request.urlopen(f"{self.web_url}/healthz", timeout=1) as answer:  # noqa: S310
                    if answer.status == 200:
                        self.check_alive()  # the answer came from our server, not an orphan
                        return
            except OSError:
                time.sleep(0.2)
        raise StorageError(f"the web server did not answer at {self.web_url} in {timeout_s:g}s")

    def _announce(self) -> None:
        click.secho(f"Signoff is up: {self.web_url}", fg="green", bold=True)
        if self.settings.admin_password.get_secret_value():
            password = "the password in SIGNOFF_ADMIN_PASSWORD"  # noqa: S105  # its name only
        else:
            kept = self.state.root / "admin-password"
            password = f"password {self.env['SIGNOFF_ADMIN_PASSWORD']}  (kept in {kept})"
        click.echo(f"  sign in as {self.settings.admin_user!r} with {password}")
        if self.shared_redis_url is None:
            click.echo(f"  redis: {self.redis_url}  (its own; data in {self.state.redis_dir})")
        else:
            click.echo(f"  redis: {redacted(self.redis_url)}  (SIGNOFF_REDIS_URL)")
        if self.settings.broker_url:  # a broker apart; by default the Redis above is it too
            click.echo(f"  broker: {described(self.settings)}  (SIGNOFF_BROKER_URL)")
        click.echo(f"  logs: {self.state.logs}")
        for line in self.cli_hint():
            click.echo(line)
        click.echo("  the model is the offline demo model unless SIGNOFF_PROVIDER says otherwise")
        click.echo("  Ctrl-C stops everything")

    def cli_hint(self) -> list[str]:
        """How to use the `signoff` CLI on this Signoff from another terminal."""
        steps = []
        ours = Path(sys.executable).with_name("signoff")
        activate = ours.with_name("activate")
        on_path = shutil.which("signoff")
        if activate.exists() and (on_path is None or Path(on_path) != ours):
            steps.append(f"source {_relative(activate)}")
        if self.shared_redis_url is None:
            steps.append(f"export SIGNOFF_REDIS_URL={self.redis_url}")
        if self.settings.broker_url:
            # a client that does not know the broker is apart sends into the state Redis's
            # queue, which no worker reads: its prompts would wait for ever
            shown = redacted(self.settings.broker_url)
            where = "" if shown == self.settings.broker_url else "  # with its password"
            steps.append(f"export SIGNOFF_BROKER_URL={shown}{where}")
        if not steps:
            return []
        return ["  the CLI, from another terminal here:", *(f"    {step}" for step in steps)]

    def _on_child_exit(self, signum: int, frame: FrameType | None) -> None:
        self.check_alive()

    def check_alive(self) -> None:
        """Raises when a child exited: a half-running system is worse than a stopped one."""
        child = self.group.exited()
        if child is not None:
            raise SignoffError(_obituary(child))

    def wait(self) -> None:
        while True:
            self.check_alive()
            time.sleep(0.5)

    def stop(self) -> None:
        """Stops every child and releases the directory; signals cannot interrupt it."""
        for each in STOP_SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.group.stop()
        self.state.unlock()


def _obituary(child: Child) -> str:
    code = child.process.returncode
    how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
    tail = child.log_tail().rstrip()
    if tail:
        where = f"; the end of {child.log}:\n{tail}"
    else:
        where = f"; its log, {child.log}, is empty" if child.log is not None else ""
    return f"{child.name} {how}, so everything stopped{where}"


def _relative(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.absolute().relative_to(Path.cwd()))
    return str(path)


def _answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()
