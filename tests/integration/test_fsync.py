"""How durable Redis's AOF is: compose lets the operator choose, `signoff doctor` says which.

The doctor is run against redis-servers started with each setting.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from shared.local.embedded_redis import find_redis_server, free_port
from tests.integration.test_compose import SECRETS, parsed_config
from tests.integration.test_compose import docker_env as docker_env  # the fixture
from tests.stack import ROOT, SIGNOFF

# one Redis: doctor reads one Redis's persistence settings
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]


@contextmanager
def redis_server(*options: str) -> Iterator[str]:
    """A redis-server started with `options`; yields its URL."""
    port = free_port()
    data = tempfile.mkdtemp(prefix="signoff-fsync-")
    command = [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--dir", data]
    process = subprocess.Popen(
        [*command, "--save", "", "--maxmemory-policy", "noeviction", *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    try:
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert process.poll() is None, f"redis-server {options} exited"
                time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(data, ignore_errors=True)


def doctor_aof(url: str) -> dict[str, str]:
    result = subprocess.run(
        [SIGNOFF, "doctor", "--json"],
        env={**os.environ, "SIGNOFF_REDIS_URL": url, "SIGNOFF_KEY_PREFIX": "fsync"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr  # warnings never fail the doctor
    [aof] = [check for check in json.loads(result.stdout)["checks"] if check["name"] == "aof"]
    return dict(aof)


@pytest.mark.parametrize(
    ("options", "level", "says"),
    [
        (
            ("--appendonly", "yes", "--appendfsync", "always"),
            "ok",
            ["appendonly yes, appendfsync always (on disk before Redis answers)"],
        ),
        (
            ("--appendonly", "yes", "--appendfsync", "everysec"),
            "warn",
            [
                "appendonly yes, appendfsync everysec: a host crash",
                "loses the last second of writes",
                "completed turns run again, tools may run twice and resolved approvals reopen",
                "appendfsync always prevents it",
            ],
        ),
        (
            ("--appendonly", "yes", "--appendfsync", "no"),
            "warn",
            ["appendonly yes, appendfsync no: a host crash", "the OS had not flushed yet"],
        ),
        (("--appendonly", "no"), "warn", ["appendonly is off: a Redis restart loses"]),
    ],
    ids=["always", "everysec", "no", "aof-off"],
)
def test_doctor_reports_the_fsync_policy(
    options: tuple[str, ...], level: str, says: list[str]
) -> None:
    with redis_server(*options) as url:
        aof = doctor_aof(url)
        assert aof["level"] == level, aof
        for words in says:
            assert words in aof["message"], aof
        assert "\n" not in aof["message"]


@pytest.mark.parametrize(("chosen", "expected"), [(None, "everysec"), ("always", "always")])
def test_compose_runs_redis_with_the_chosen_fsync_policy(
    docker_env: dict[str, str], chosen: str | None, expected: str
) -> None:
    env = {**docker_env, **SECRETS}
    if chosen is not None:
        env["SIGNOFF_REDIS_APPENDFSYNC"] = chosen
    command = parsed_config(env)["services"]["redis"]["command"]
    assert " ".join(command).count("--appendfsync") == 1
    assert command[command.index("--appendfsync") + 1] == expected
    header = (ROOT / "docker-compose.yml").read_text().split("\nname:")[0]
    assert "a HOST crash" in header and "SIGNOFF_REDIS_APPENDFSYNC=always" in header
