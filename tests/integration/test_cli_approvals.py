"""`signoff approvals`, `signoff chat` and `signoff doctor` as subprocesses on a real stack."""

from __future__ import annotations

import getpass
import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest
import redis

from shared.client import Client, Conversation
from shared.local.embedded_redis import EmbeddedRedis, free_port
from shared.models.events import ConversationStatus
from shared.models.notifications import Notification, NotificationStatus
from shared.models.steps import StepType
from tests.stack import ROOT, SIGNOFF, run_cli

EMAIL = 'call send_email {"to": "ops@example.com", "subject": "Report", "body": "All good."}'
QUESTION = (
    'call ask_operator {"question": "Budget?", "schema": {"type": "object", '
    '"properties": {"budget": {"type": "integer"}}, "required": ["budget"]}}'
)
ME = f"cli:{getpass.getuser()}"


def parked(conversation: Conversation, timeout_s: float = 20.0) -> Notification:
    """The one pending notification of a conversation once its turn has parked."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = conversation.pending_notifications()
        if pending and conversation.status is ConversationStatus.WAITING_FOR_USER:
            [note] = pending
            return note
        time.sleep(0.02)
    raise AssertionError(f"conversation {conversation.conversation_id} did not park")


def park(client: Client, prompt: str = EMAIL) -> tuple[Conversation, str, Notification]:
    conversation = client.new_conversation()
    turn = conversation.send(prompt)
    return conversation, turn, parked(conversation)


def still_pending(client: Client, note: Notification) -> bool:
    return client.notifications.get(note.id).status is NotificationStatus.PENDING


# approvals list / show


def test_list_shows_a_parked_notification(stack_env: dict[str, str], client: Client) -> None:
    conversation, _, note = park(client)
    cid = conversation.conversation_id
    table = run_cli(stack_env, "approvals", "list")
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if note.id in line)
    assert "send_email" in row and "ops@example.com" in row
    as_json = run_cli(stack_env, "approvals", "list", "--json", "--conversation", cid)
    assert as_json.returncode == 0, as_json.stderr
    [listed] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert listed["id"] == note.id and listed["status"] == "pending"
    assert listed["tool_call"]["args"]["to"] == "ops@example.com"
    other_tool = run_cli(stack_env, "approvals", "list", "--json", "--tool", "calculator")
    assert other_tool.returncode == 0 and note.id not in other_tool.stdout
    same_tool = run_cli(stack_env, "approvals", "list", "--json", "--tool", "send_email")
    assert note.id in same_tool.stdout


def test_list_filters_by_age_and_pages(stack_env: dict[str, str], client: Client) -> None:
    first = park(client)[2]
    second = park(client)[2]
    older = run_cli(stack_env, "approvals", "list", "--json", "--older-than", "1h")
    assert older.returncode == 0 and first.id not in older.stdout
    recent = run_cli(stack_env, "approvals", "list", "--json", "--older-than", "0s")
    assert first.id in recent.stdout and second.id in recent.stdout
    ids = [json.loads(line)["id"] for line in recent.stdout.splitlines()]
    page = run_cli(stack_env, "approvals", "list", "--json", "--offset", "1", "--limit", "1")
    assert [json.loads(line)["id"] for line in page.stdout.splitlines()] == ids[1:2]
    bad = run_cli(stack_env, "approvals", "list", "--older-than", "10x")
    assert bad.returncode == 2 and "not a duration like 30s" in bad.stderr


def test_show_prints_the_arguments_and_context(stack_env: dict[str, str], client: Client) -> None:
    conversation, _, note = park(client)
    shown = run_cli(stack_env, "approvals", "show", note.id)
    assert shown.returncode == 0, shown.stderr
    assert f"notification {note.id} (pending)" in shown.stdout
    assert "tool:         send_email" in shown.stdout
    assert '  "subject": "Report",' in shown.stdout  # pretty-printed, one key a line
    assert f"conversation: {conversation.conversation_id}" in shown.stdout
    assert re.search(r"#0 user_input \(user, done\) call send_email", shown.stdout)
    assert "tool_call (model" in shown.stdout
    missing = run_cli(stack_env, "approvals", "show", f"{conversation.conversation_id}.nope")
    assert missing.returncode == 2 and "does not exist" in missing.stderr


# allow / deny / submit


def test_allow_resumes_the_turn_and_a_second_allow_conflicts(
    stack_env: dict[str, str], client: Client
) -> None:
    conversation, turn, note = park(client)
    allowed = run_cli(stack_env, "approvals", "allow", note.id)
    assert allowed.returncode == 0, allowed.stderr
    assert f"allowed {note.id} as {ME}" in allowed.stdout
    response = conversation.wait_for_turn(turn, timeout=30)
    assert "send_email returned" in response.text and "queued" in response.text
    resolved = client.notifications.get(note.id)
    assert resolved.status is NotificationStatus.RESOLVED and resolved.resolved_by == ME
    again = run_cli(stack_env, "approvals", "allow", note.id, "--as", "bob")
    assert again.returncode == 1
    assert f"error: notification {note.id} was already resolved (allow) by {ME}" in again.stderr
    assert client.notifications.get(note.id).resolved_by == ME


def test_allow_with_edited_arguments(stack_env: dict[str, str], client: Client) -> None:
    conversation, turn, note = park(client)
    broken = run_cli(stack_env, "approvals", "allow", note.id, "--args", '{"to": ')
    assert broken.returncode == 1
    assert "--args is not valid JSON" in broken.stderr and "nothing was resolved" in broken.stderr
    invalid = run_cli(stack_env, "approvals", "allow", note.id, "--args", '{"to": "x@y.z"}')
    assert invalid.returncode == 1
    assert "edited arguments are invalid" in invalid.stderr and "'subject'" in invalid.stderr
    assert still_pending(client, note)
    edited = {"to": "boss@example.com", "subject": "Edited", "body": "New body"}
    ok = run_cli(stack_env, "approvals", "allow", note.id, "--args", json.dumps(edited))
    assert ok.returncode == 0, ok.stderr
    response = conversation.wait_for_turn(turn, timeout=30)
    result = next(s for s in response.steps if s.type is StepType.TOOL_RESULT)
    assert result.tool_calls[0].args == edited


def test_deny_needs_a_reason(stack_env: dict[str, str], client: Client) -> None:
    conversation, turn, note = park(client)
    no_reason = run_cli(stack_env, "approvals", "deny", note.id)
    assert no_reason.returncode != 0 and "Missing option '--reason'" in no_reason.stderr
    blank = run_cli(stack_env, "approvals", "deny", note.id, "--reason", "   ")
    assert blank.returncode == 1 and "a denial needs a reason" in blank.stderr
    assert still_pending(client, note)
    denied = run_cli(
        stack_env, "approvals", "deny", note.id, "--reason", "not on a Friday", "--as", "alice"
    )
    assert denied.returncode == 0, denied.stderr
    assert f"denied {note.id} as cli:alice" in denied.stdout
    response = conversation.wait_for_turn(turn, timeout=30)
    assert "send_email was denied" in response.text and "not on a Friday" in response.text
    resolved = client.notifications.get(note.id)
    assert resolved.resolved_by == "cli:alice"
    assert resolved.resolution is not None and resolved.resolution.kind == "deny"


def test_bulk_allow_of_a_batch_confirms_the_count_and_deny_all(
    stack_env: dict[str, str], client: Client, tmp_path: Path
) -> None:
    source = tmp_path / "mail.jsonl"
    source.write_text("".join(json.dumps({"prompt": EMAIL}) + "\n" for _ in range(3)))
    out = str(tmp_path / "mail-out.jsonl")
    submitted = run_cli(stack_env, "batch", "run", str(source), "--out", out, "--no-wait")
    bid = submitted.stdout.strip()
    _, _, outsider = park(client)
    deadline = time.monotonic() + 30
    while len(client.notifications.pending(batch_id=bid)) < 3:
        assert time.monotonic() < deadline, "the batch did not park"
        time.sleep(0.05)
    both = run_cli(stack_env, "approvals", "allow", outsider.id, "--batch", bid)
    assert both.returncode == 2 and "not both" in both.stderr
    neither = run_cli(stack_env, "approvals", "allow")
    assert neither.returncode == 2 and "give a NOTIFICATION_ID" in neither.stderr
    unconfirmed = run_cli(stack_env, "approvals", "allow", "--batch", bid, stdin="")
    assert unconfirmed.returncode == 1 and "pass --yes" in unconfirmed.stderr
    assert len(client.notifications.pending(batch_id=bid)) == 3
    allowed = run_cli(stack_env, "approvals", "allow", "--batch", bid, "--yes")
    assert allowed.returncode == 0, allowed.stderr
    assert "3 pending approvals match" in allowed.stdout
    assert "allowed 3, already resolved 0" in allowed.stdout
    assert client.notifications.pending(batch_id=bid) == [] and still_pending(client, outsider)
    denied = run_cli(stack_env, "approvals", "deny", "--all", "--reason", "no", "--yes")
    assert denied.returncode == 0 and "denied " in denied.stdout, denied.stderr
    assert not still_pending(client, outsider)


def _on_a_terminal(env: dict[str, str], answer: str, *args: str) -> tuple[int, str]:
    """Runs the CLI with a pseudo-terminal as stdin, typing `answer` once it asks."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [SIGNOFF, *args],
        env={**os.environ, **env},
        cwd=ROOT,
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    seen = b""
    answered = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the CLI exited and closed the terminal
                break
            seen += chunk
        if not answered and b"[y/N]" in seen:
            os.write(leader, answer.encode() + b"\n")
            answered = True
        if process.poll() is not None and not ready:
            break
    os.close(leader)
    return process.wait(timeout=10), seen.decode(errors="replace")


def test_bulk_allow_asks_on_a_terminal_and_a_no_resolves_nothing(
    stack_env: dict[str, str], client: Client, tmp_path: Path
) -> None:
    source = tmp_path / "ask.jsonl"
    source.write_text("".join(json.dumps({"prompt": EMAIL}) + "\n" for _ in range(2)))
    out = str(tmp_path / "ask-out.jsonl")
    bid = run_cli(stack_env, "batch", "run", str(source), "--out", out, "--no-wait").stdout.strip()
    deadline = time.monotonic() + 30
    while len(client.notifications.pending(batch_id=bid)) < 2:
        assert time.monotonic() < deadline, "the batch did not park"
        time.sleep(0.05)
    status, shown = _on_a_terminal(stack_env, "n", "approvals", "allow", "--batch", bid)
    assert status == 1 and "Allow all 2? [y/N]" in shown and "Aborted" in shown, shown
    assert len(client.notifications.pending(batch_id=bid)) == 2
    status, shown = _on_a_terminal(stack_env, "y", "approvals", "allow", "--batch", bid)
    assert status == 0 and "allowed 2, already resolved 0" in shown, shown
    assert client.notifications.pending(batch_id=bid) == []


def test_submit_validates_the_json_and_the_schema(
    stack_env: dict[str, str], client: Client, tmp_path: Path
) -> None:
    conversation, turn, note = park(client, QUESTION)
    neither = run_cli(stack_env, "approvals", "submit", note.id)
    assert neither.returncode == 2 and "exactly one of --json JSON or --file PATH" in neither.stderr
    broken = run_cli(stack_env, "approvals", "submit", note.id, "--json", "{budget: 5}")
    assert broken.returncode == 1 and "--json is not valid JSON" in broken.stderr
    wrong = run_cli(stack_env, "approvals", "submit", note.id, "--json", '{"budget": "lots"}')
    assert wrong.returncode == 1
    assert "submitted content is invalid: $.budget: 'lots' is not of type 'integer'" in wrong.stderr
    missing = run_cli(stack_env, "approvals", "submit", note.id, "--json", "{}")
    assert missing.returncode == 1 and "'budget' is a required property" in missing.stderr
    assert still_pending(client, note)
    answer = tmp_path / "answer.json"
    answer.write_text('{"budget": 1200}\n')
    ok = run_cli(stack_env, "approvals", "submit", note.id, "--file", str(answer))
    assert ok.returncode == 0, ok.stderr
    response = conversation.wait_for_turn(turn, timeout=30)
    assert "ask_operator returned" in response.text and "1200" in response.text
    again = run_cli(stack_env, "approvals", "submit", note.id, "--json", '{"budget": 1}')
    assert again.returncode == 1 and "already resolved (submit)" in again.stderr


# chat


def notes_of(client: Client, conversation: Conversation) -> list[Notification]:
    """Every notification of a conversation, whatever its status."""
    recent = client.notifications.recent(limit=500)
    return [n for n in recent if n.conversation_id == conversation.conversation_id]


def chat_conversation(client: Client, stderr: str) -> Conversation:
    match = re.search(r"^conversation (\S+)", stderr, re.MULTILINE)
    assert match, stderr
    return client.conversation(match[1])


def test_chat_streams_answers_from_piped_input(stack_env: dict[str, str], client: Client) -> None:
    result = run_cli(stack_env, "chat", stdin="hello from chat\n\nsecond prompt\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("[demo model]") == 2
    assert "hello from chat" in result.stdout and "second prompt" in result.stdout
    assert "nothing was cancelled" in result.stderr
    assert chat_conversation(client, result.stderr).turn_count == 2


def test_chat_asks_about_a_parked_call_and_allow_resumes(
    stack_env: dict[str, str], client: Client
) -> None:
    result = run_cli(stack_env, "chat", stdin=f"{EMAIL}\nallow\n")
    assert result.returncode == 0, result.stderr
    assert "Allow send_email?" in result.stderr and '"to": "ops@example.com"' in result.stderr
    assert re.search(rf"allow: \S+ resolved as {re.escape(ME)}", result.stderr)
    assert "send_email returned" in result.stdout
    conversation = chat_conversation(client, result.stderr)
    assert "send_email returned" in conversation.last_response
    [note] = notes_of(client, conversation)
    assert note.status is NotificationStatus.RESOLVED and note.resolved_by == ME


def test_chat_asks_again_after_a_bad_answer(stack_env: dict[str, str], client: Client) -> None:
    answers = "frobnicate\ndeny\nsubmit {}\ndeny too risky\n"
    result = run_cli(stack_env, "chat", stdin=f"{EMAIL}\n{answers}")
    assert result.returncode == 0, result.stderr
    assert "'frobnicate' is not an answer" in result.stderr
    assert "a denial needs a reason" in result.stderr
    assert "accepts allow, deny; not submit" in result.stderr
    assert "send_email was denied" in result.stdout and "too risky" in result.stdout


def test_chat_skip_leaves_the_notification_pending(
    stack_env: dict[str, str], client: Client
) -> None:
    chat = subprocess.Popen(
        [SIGNOFF, "chat"],
        env={**os.environ, **stack_env},
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert chat.stdin is not None
    chat.stdin.write(f"{EMAIL}\nskip\n")
    chat.stdin.flush()
    note = _wait_for_pending_note(client)
    conversation = client.conversation(note.conversation_id)
    time.sleep(0.5)  # the skip has been read by now; the note must still be pending
    assert still_pending(client, note)
    client.resolve_notification(note.id, {"kind": "allow"}, actor="web:carol")
    stdout, stderr = chat.communicate(timeout=30)
    assert chat.returncode == 0, stderr
    assert f"left {note.id} pending" in stderr
    assert "send_email returned" in stdout  # the chat kept following until the UI resolved it
    assert "send_email returned" in conversation.last_response


def _wait_for_pending_note(client: Client, timeout_s: float = 20.0) -> Notification:
    known = {n.id for n in client.notifications.recent(limit=500)}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        fresh = [n for n in client.notifications.pending(limit=500) if n.id not in known]
        if fresh:
            return fresh[0]
        time.sleep(0.05)
    raise AssertionError("the chat's turn did not park")


# doctor


def doctor_lines(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """`name -> "level  message"` from doctor's output."""
    lines = {}
    for line in result.stdout.splitlines():
        match = re.fullmatch(r"(ok|warn|FAIL) +([\w-]+): (.*)", line)
        assert match, f"not a doctor line: {line!r}"
        lines[match[2]] = f"{match[1]} {match[3]}"
    return lines


@pytest.mark.one_redis  # the broker is the state Redis
def test_doctor_on_the_test_redis(stack_env: dict[str, str], client: Client) -> None:
    result = run_cli(stack_env, "doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    checks = doctor_lines(result)
    assert checks["redis"].startswith("ok reachable at redis://127.0.0.1:")
    assert checks["maxmemory-policy"].startswith("ok noeviction")
    assert checks["aof"].startswith("warn appendonly is off")
    assert checks["password"].startswith("warn none")
    assert (
        checks["broker"] == "ok the state Redis (a state write pushes its task in the same script)"
    )
    # `signoff worker` is two Celery workers: turns, and webhook deliveries on their own threads
    assert re.fullmatch(r"ok 2 answered: w1-webhooks@\S+, w1@\S+", checks["workers"])
    heartbeat = client.keys.heartbeat("beat")
    assert checks["scheduler"].startswith(f"warn unknown (no heartbeat at {heartbeat})")
    as_json = json.loads(run_cli(stack_env, "doctor", "--json").stdout)
    assert as_json["ok"] is True
    assert {c["name"]: c["level"] for c in as_json["checks"]} == {
        "redis": "ok",
        "maxmemory-policy": "ok",
        "aof": "warn",
        "memory": "ok",
        "password": "warn",
        "broker": "ok",
        "workers": "ok",
        "scheduler": "warn",
        "metrics": "ok",
        "tracing": "ok",
        "archive": "ok",
    }
    assert checks["metrics"] == (
        "ok web /metrics (operators); worker off (SIGNOFF_METRICS_PORT unset); "
        "beat off (SIGNOFF_BEAT_METRICS_PORT unset)"
    )
    assert checks["tracing"].startswith("ok off (set SIGNOFF_OTEL_ENDPOINT")
    assert checks["archive"].startswith("ok the directory .signoff/archive")


def test_doctor_reads_the_heartbeat_of_the_sweep(stack_env: dict[str, str], client: Client) -> None:
    key = client.keys.heartbeat("beat")
    try:
        client.tasks.sweep()  # what `signoff beat` sends; the worker's sweep writes the heartbeat
        deadline = time.monotonic() + 20
        while not client.redis.exists(key) and time.monotonic() < deadline:
            time.sleep(0.05)
        fresh = doctor_lines(run_cli(stack_env, "doctor"))["scheduler"]
        match = re.fullmatch(r"ok heartbeat (\d+)s ago", fresh)
        assert match and int(match[1]) <= 30, fresh
        client.redis.set(key, str(time.time() - 3600))
        stale = doctor_lines(run_cli(stack_env, "doctor"))["scheduler"]
        assert re.match(r"warn last heartbeat 36\d\ds ago: is `signoff beat` running\?", stale)
        client.redis.set(key, "yesterday")
        garbled = doctor_lines(run_cli(stack_env, "doctor"))["scheduler"]
        assert garbled == f"warn unknown ({key} holds 'yesterday', not a time)"
    finally:
        client.redis.delete(key)


@pytest.mark.one_redis  # sets one Redis's eviction policy
def test_doctor_fails_when_redis_may_evict(
    stack_env: dict[str, str], redis_server: EmbeddedRedis
) -> None:
    server = redis.Redis.from_url(redis_server.url, decode_responses=True)
    server.config_set("maxmemory-policy", "allkeys-lru")
    try:
        result = run_cli(stack_env, "doctor")
    finally:
        server.config_set("maxmemory-policy", "noeviction")
        server.close()
    assert result.returncode == 1
    line = doctor_lines(result)["maxmemory-policy"]
    assert line.startswith("FAIL is allkeys-lru") and "lose conversation state" in line
    as_json = json.loads(run_cli(stack_env, "doctor", "--json").stdout)
    assert as_json["ok"] is True  # restored


def test_doctor_fails_when_redis_is_unreachable(stack_env: dict[str, str]) -> None:
    nowhere = {**stack_env, "SIGNOFF_REDIS_URL": f"redis://:pw@127.0.0.1:{free_port()}/0"}
    result = run_cli(nowhere, "doctor")
    assert result.returncode == 1
    [line] = result.stdout.splitlines()
    assert line.startswith("FAIL  redis: cannot reach redis://:***@127.0.0.1:")
    assert "pw@" not in result.stdout


@pytest.mark.parametrize("value", ["-5", "nope"])
def test_doctor_reports_invalid_settings(stack_env: dict[str, str], value: str) -> None:
    result = run_cli({**stack_env, "SIGNOFF_LEASE_TTL_MS": value}, "doctor")
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL  settings: invalid settings: SIGNOFF_LEASE_TTL_MS")
