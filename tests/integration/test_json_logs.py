"""`SIGNOFF_LOG_FORMAT=json` in real processes: `signoff worker`, `signoff web`, `signoff beat`
and the CLI write one JSON object a line, lines of a leg carry its conversation and turn,
and no secret from the settings, a request or a tool's arguments reaches any line."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.client import Client
from shared.local.embedded_redis import free_port
from tests.integration.test_web_command import wait_healthy
from tests.stack import ROOT, SIGNOFF, WorkerProcess, effect_prompt

pytestmark = pytest.mark.integration

EFFECT_TOOLS = True  # tests.effect_tools logs each call it records, inside the leg
OPENAI_KEY = "sk-json-logs-test-0123456789abcdef"
SECRET_KEY = "session-key-for-json-logs-0123456789"
METRICS_TOKEN = "metrics-token-json-logs-987654"
SECRETS = (OPENAI_KEY, SECRET_KEY, METRICS_TOKEN, "hunter2-topsecret", "so_notarealtoken0123456789")
STACK_ENV = {
    "SIGNOFF_FLUSH_INTERVAL_MS": "10",
    "SIGNOFF_LOG_FORMAT": "json",
    "SIGNOFF_OPENAI_API_KEY": OPENAI_KEY,
    "SIGNOFF_SECRET_KEY": SECRET_KEY,
    "SIGNOFF_METRICS_TOKEN": METRICS_TOKEN,
}


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of `text` as JSON; a line that is not fails the test, naming it."""
    lines = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"not a JSON line: {line!r}") from None
    assert lines, "no line was logged"
    return lines


def assert_no_secret(text: str) -> None:
    leaked = [secret for secret in SECRETS if secret in text]
    assert not leaked, f"secrets in the log: {leaked}"


@pytest.fixture(scope="module")
def worker(stack_env: dict[str, str]) -> Iterator[WorkerProcess]:
    process = WorkerProcess(stack_env).start()
    yield process
    process.stop()


def test_worker_lines_are_json_with_the_leg_s_ids_and_no_secret(
    client: Client, worker: WorkerProcess
) -> None:
    conversation = client.new_conversation(tools={"record_effect": "auto"})
    note = f"password=hunter2-topsecret {OPENAI_KEY}"
    turn = conversation.send(effect_prompt(note))
    conversation.wait_for_turn(turn, timeout=30)
    cid = conversation.conversation_id
    deadline = time.monotonic() + 10
    while f"advance {cid}: finished" not in worker.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.stop()  # its shutdown lines too
    text = worker.log()
    lines = json_lines(text)
    assert_no_secret(text)
    [recorded] = [line for line in lines if line["message"].startswith("recording ")]
    assert recorded["message"] == "recording password=*** ***"  # the known key, masked
    assert recorded["conversation_id"] == cid and recorded["turn_id"] == turn
    assert recorded["logger"] == "tests.effect_tools" and recorded["process"] == "worker"
    [advanced] = [line for line in lines if line["message"] == f"advance {cid}: finished"]
    assert advanced["conversation_id"] == cid and "turn_id" not in advanced
    assert any(line["message"].endswith(" ready.") for line in lines)  # Celery's own lines
    assert {line["process"] for line in lines} == {"worker"}


def test_web_lines_are_json_and_mask_links_and_tokens(stack_env: dict[str, str]) -> None:
    port = free_port()
    env = {**os.environ, **stack_env, "SIGNOFF_WEB_PORT": str(port), "SIGNOFF_WEB_WORKERS": "1"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        web = subprocess.Popen([SIGNOFF, "web"], cwd=ROOT, env=env, stdout=out, stderr=err)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, web)
            for path, token in (
                ("/approve/eyJub25jZSI6ImFiYyJ9.c2lnbmF0dXJl", None),
                ("/api/v1/conversations?password=hunter2-topsecret", "so_notarealtoken0123456789"),
            ):
                request = urllib.request.Request(url + path)
                if token:
                    request.add_header("Authorization", f"Bearer {token}")
                with contextlib.suppress(urllib.error.HTTPError):
                    urllib.request.urlopen(request, timeout=5).close()
        finally:
            web.terminate()
            web.wait(timeout=30)
        out.seek(0)
        err.seek(0)
        text = out.read().decode() + err.read().decode()
    lines = json_lines(text)
    assert_no_secret(text)
    assert "eyJub25jZSI6ImFiYyJ9" not in text  # the approval link's token
    messages = [line["message"] for line in lines]
    assert any("/approve/***" in m for m in messages)  # the access log, masked
    assert any("password=***" in m for m in messages)
    assert any(line["logger"] == "gunicorn.error" for line in lines)
    assert {line["process"] for line in lines} == {"web"}


def test_beat_and_cli_lines_are_json(stack_env: dict[str, str], tmp_path: Path) -> None:
    log_path = tmp_path / "beat.log"
    with log_path.open("wb") as log:
        beat = subprocess.Popen(
            [SIGNOFF, "beat"], cwd=ROOT, env={**os.environ, **stack_env}, stdout=log, stderr=log
        )
        try:
            deadline = time.monotonic() + 20
            while "beat: Starting" not in log_path.read_text() and time.monotonic() < deadline:
                assert beat.poll() is None, log_path.read_text()
                time.sleep(0.1)
        finally:
            beat.terminate()
            beat.wait(timeout=30)
    text = log_path.read_text()
    lines = json_lines(text)
    assert_no_secret(text)
    assert any(line["message"].startswith("beat: Starting") for line in lines)
    assert {line["process"] for line in lines} == {"beat"}
    # the CLI, as `signoff` sets it up before any command: a library's warning
    script = (
        "import logging; from cli.main import _log_lines; _log_lines(); "
        f"logging.getLogger('redis').warning('lost redis://:{SECRET_KEY}@db:6379, retrying')"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, **stack_env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    [line] = json_lines(done.stderr)
    assert line["message"] == "lost redis://:***@db:6379, retrying"
    assert line["process"] == "cli" and line["level"] == "warning"
