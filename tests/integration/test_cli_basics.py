"""The CLI against a real stack: `signoff worker`, `submit`, errors with a non-zero exit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from shared.client import Client
from tests.stack import ROOT, SIGNOFF, WorkerProcess, run_cli


def test_submit_follow_streams_the_answer(stack_env: dict[str, str], worker: WorkerProcess) -> None:
    result = run_cli(stack_env, "submit", "hello from the cli", "--follow")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("[demo model]") and "hello from the cli" in result.stdout
    assert "conversation " in result.stderr


def test_submit_prints_ids_and_the_turn_runs(stack_env: dict[str, str], client: Client) -> None:
    result = run_cli(stack_env, "submit", "in the background")
    assert result.returncode == 0, result.stderr
    ids = json.loads(result.stdout)
    conversation = client.conversation(ids["conversation_id"])
    assert "in the background" in conversation.wait_for_turn(ids["turn_id"], timeout=30).text


def test_submit_takes_this_turns_options(
    stack_env: dict[str, str], client: Client, tmp_path: Path
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object", "properties": {"answer": {"type": "string"}}}')
    refused = run_cli(
        stack_env, "submit", "call get_time {}", "--follow", "--tool-selection", "none"
    )
    assert refused.returncode == 0 and "not to use tools" in refused.stdout, refused.stderr
    ids = json.loads(run_cli(stack_env, "submit", "rate it", f"--response-schema=@{schema}").stdout)
    response = client.conversation(ids["conversation_id"]).wait_for_turn(ids["turn_id"], timeout=30)
    assert isinstance(response.structured_output, dict)
    slow = run_cli(stack_env, "submit", "#slow #long", "--follow", "--timeout", "0.3")
    assert slow.returncode == 1 and "timed out after 0.3s" in slow.stderr


def test_submit_refuses_bad_options_clearly(
    stack_env: dict[str, str], worker: WorkerProcess
) -> None:
    not_json = run_cli(stack_env, "submit", "x", "--response-schema", "{oops")
    assert not_json.returncode == 2 and "--response-schema" in not_json.stderr
    missing = run_cli(stack_env, "submit", "x", "--response-schema", "@/no/such/file.json")
    assert missing.returncode == 2 and "cannot read /no/such/file.json" in missing.stderr
    negative = run_cli(stack_env, "submit", "x", "--timeout", "-1")
    assert negative.returncode == 1 and "timeout_s" in negative.stderr
    assert "Traceback" not in negative.stderr + missing.stderr + not_json.stderr


def test_errors_are_one_line_and_non_zero(stack_env: dict[str, str], worker: WorkerProcess) -> None:
    missing = run_cli(stack_env, "submit", "x", "--conversation", "nosuchconversation")
    assert missing.returncode == 2
    assert missing.stderr.strip() == "error: conversation nosuchconversation does not exist"
    empty = run_cli(stack_env, "submit", "\x01 ")
    assert empty.returncode == 1 and "prompt is empty" in empty.stderr
    bad_env = run_cli({**stack_env, "SIGNOFF_LEASE_TTL_MS": "-5"}, "submit", "x")
    assert bad_env.returncode == 1 and "SIGNOFF_LEASE_TTL_MS" in bad_env.stderr


def test_signoff_worker_command_runs_turns(stack_env: dict[str, str], client: Client) -> None:
    worker = WorkerProcess(stack_env, name="cli")
    worker.process = subprocess.Popen(
        [SIGNOFF, "worker", "-n", "cli@%h"],
        cwd=ROOT,
        env=worker.env,
        stdout=worker.log_path.open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        worker._wait_for("ready.", 30, count=2)
        assert "signoff.advance" in worker.log()
        assert client.new_conversation().chat_to_completion("via signoff worker").text
    finally:
        worker.process.send_signal(signal.SIGTERM)
        worker.process.wait(timeout=20)
    assert worker.process.returncode == 0


def test_user_add_and_token_create(stack_env: dict[str, str], client: Client) -> None:
    from shared.models.users import Role
    from shared.store.users import TokenStore, UserStore

    added = subprocess.run(
        [SIGNOFF, "user", "add", "olivia", "--password", "a-long-passphrase"],
        env={**os.environ, **stack_env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert added.returncode == 0 and "olivia" in added.stdout
    assert UserStore(client.redis, client.keys).verify("olivia", "a-long-passphrase")
    created = run_cli(stack_env, "token", "create", "ci", "--role", "submitter")
    token = created.stdout.strip()
    found = TokenStore(client.redis, client.keys).lookup(token)
    assert found is not None and found.role is Role.SUBMITTER


def test_tail_prints_readable_lines(stack_env: dict[str, str], client: Client) -> None:
    conversation = client.new_conversation(allow_all=True)
    turn = conversation.send("call get_time {}")
    answer = conversation.wait_for_turn(turn, timeout=30).text
    process = subprocess.Popen(
        [SIGNOFF, "tail", conversation.conversation_id, "--from-start"],
        env={**os.environ, **stack_env},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, _ = process.communicate(timeout=3)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=10)
    assert "{'" not in out and "kind" not in out, out  # no Python reprs
    assert "\nthinking: " in "\n" + out and "→ get_time()" in out, out
    assert answer and out.count(answer) == 1, out
    assert f"turn {turn[:8]} started" in out and f"turn {turn[:8]} completed" in out, out
    assert "status: idle" in out, out
