"""RabbitMQ for the tests: the machine's server (installed and started by `make test`), a
vhost of the test session's own, created and deleted with `rabbitmqctl`."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import uuid
from typing import Any

from shared.client.tasks import TaskSender
from shared.settings import Settings

HOST, PORT = "127.0.0.1", 5672
CTL_TIMEOUT_S = 60
# A worker's first start on a vhost declares Celery's 28 delay levels as quorum queues, in each
# of its two Celery workers: seconds, many more on a loaded machine.
WORKER_START_S = 90.0


def _ctl(*args: str) -> str:
    ctl = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"
    done = subprocess.run(
        [ctl, "-q", *args], capture_output=True, text=True, timeout=CTL_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed: {done.stderr or done.stdout}")
    return done.stdout


def check_reachable() -> None:
    """Fails loudly (never skips) when no RabbitMQ listens: `make test` installs and starts it."""
    try:
        socket.create_connection((HOST, PORT), timeout=2).close()
    except OSError as exc:
        raise RuntimeError(
            f"no RabbitMQ at {HOST}:{PORT} ({exc}): run `make test` (it installs and starts "
            "rabbitmq-server), or start it with `rabbitmq-server -detached`"
        ) from exc


class VHost:
    """A vhost the guest user may use, deleted with everything in it by `delete`."""

    def __init__(self) -> None:
        self.name = f"signoff-test-{uuid.uuid4().hex[:8]}"
        self.url = f"amqp://guest:guest@{HOST}:{PORT}/{self.name}"

    def create(self) -> VHost:
        check_reachable()
        _ctl("add_vhost", self.name)
        _ctl("set_permissions", "-p", self.name, "guest", ".*", ".*", ".*")
        return self

    def delete(self) -> None:
        _ctl("delete_vhost", self.name)

    def queues(self) -> dict[str, dict[str, Any]]:
        """Each queue by name: its type (`quorum`, `classic`) and its ready messages."""
        rows: list[dict[str, Any]] = json.loads(
            _ctl("list_queues", "-p", self.name, "name", "type", "messages", "--formatter", "json")
            or "[]"
        )
        return {row["name"]: row for row in rows}


def env_settings(env: dict[str, str]) -> Settings:
    """Settings of a test stack's environment: its Redis, key prefix and broker."""
    return Settings(
        redis_url=env["SIGNOFF_REDIS_URL"],
        key_prefix=env["SIGNOFF_KEY_PREFIX"],
        broker_url=env["SIGNOFF_BROKER_URL"],
    )


def ready(sender: TaskSender, queue: str) -> int:
    """Messages ready in `queue` now (list_queues' counts lag by up to 5 s)."""
    with sender.app.connection_for_write() as connection:
        return int(connection.default_channel.queue_declare(queue, passive=True).message_count)
