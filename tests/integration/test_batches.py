"""Batches through the CLI on a real stack: approvals, cancel, bad input, resume, rate limits."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.client import Client
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.batches import BatchState, BatchStatus
from shared.models.events import StepEvent
from shared.models.notifications import Allow, Deny
from shared.settings import Settings
from shared.store.batches import BatchStore
from tests.stack import ROOT, SIGNOFF, WorkerProcess, run_cli


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text(
        "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)
    )
    return path


def batches(client: Client) -> BatchStore:
    return BatchStore(client.redis, client.keys, client.settings, client.tasks)


def resolve_while(client: Client, stop: threading.Event, resolved: list[str]) -> None:
    """An operator using the JSON API: resolves every pending notification as it appears."""
    from shared.store.users import TokenStore
    from webui import create_app

    token = TokenStore(client.redis, client.keys).create("operator-bot", "operator")
    api = create_app(client.settings).test_client()
    headers = {"Authorization": f"Bearer {token}"}
    while not stop.is_set():
        for note in api.get("/api/v1/notifications?limit=100", headers=headers).get_json()["items"]:
            body = (
                {"kind": "submit", "content": {"answer": "forty-two"}}
                if note["question"]
                else {"kind": "allow"}
            )
            answer = api.post(
                f"/api/v1/notifications/{note['id']}/resolve", json=body, headers=headers
            )
            assert answer.status_code in (200, 409), answer.get_json()
            if answer.status_code == 200:
                resolved.append(note["batch_id"])
        time.sleep(0.05)


def test_two_hundred_prompts_with_approvals(
    tmp_path: Path, stack_env: dict[str, str], client: Client
) -> None:
    rows = []
    for i in range(200):
        if i % 25 == 0:
            prompt = f'call send_email {{"to": "a{i}@example.com", "subject": "s{i}", "body": "b"}}'
        elif i % 40 == 1:
            prompt = 'call ask_operator {"question": "Which answer?"}'
        else:
            prompt = f"prompt number {i}"
        rows.append({"id": f"item-{i}", "prompt": prompt})
    source, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    stop, seen = threading.Event(), []
    operator = threading.Thread(target=resolve_while, args=(client, stop, seen))
    operator.start()
    try:
        result = run_cli(
            stack_env, "batch", "run", str(source), "--out", str(out), "--max-concurrency", "8"
        )
    finally:
        stop.set()
        operator.join()
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == [f"item-{i}" for i in range(200)]
    assert all(line["status"] == "done" for line in lines), [
        r for r in lines if r["status"] != "done"
    ][:3]
    assert "send_email returned" in lines[0]["text"] and "forty-two" in lines[1]["text"]
    assert "prompt number 2" in lines[2]["text"] and lines[2]["usage"]["total_token_count"] > 0
    assert len(seen) == 8 + 5
    bid = (tmp_path / "out.jsonl.batch").read_text().strip()
    info = batches(client).info(bid)
    assert info.status is BatchStatus.DONE and info.counts[BatchState.DONE] == 200
    assert info.usage.total_token_count == sum(line["usage"]["total_token_count"] for line in lines)


def test_progress_says_where_to_resolve_pending_approvals(
    tmp_path: Path, stack_env: dict[str, str], client: Client
) -> None:
    source = write_jsonl(
        tmp_path / "ask.jsonl",
        [
            {"id": "plain", "prompt": "hello"},
            {
                "id": "mail",
                "prompt": 'call send_email {"to": "x@example.com", "subject": "s", "body": "b"}',
            },
        ],
    )
    out = tmp_path / "ask-out.jsonl"
    process = subprocess.Popen(
        [SIGNOFF, "batch", "run", str(source), "--out", str(out)],
        env={**os.environ, **stack_env, "COLUMNS": "250"},
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    seen = ""
    while "waiting for approval" not in seen:
        seen += process.stderr.readline()
        assert process.poll() is None, seen
    assert "/approvals?batch=" in seen and "signoff approvals list --batch" in seen
    [note] = client.notifications.pending(
        batch_id=(tmp_path / "ask-out.jsonl.batch").read_text().strip()
    )
    client.resolve_notification(note.id, Allow(), actor="operator")
    assert process.wait(timeout=60) == 0
    assert [json.loads(line)["status"] for line in out.read_text().splitlines()] == ["done", "done"]


def test_approval_hint_once_per_change_of_state(
    tmp_path: Path, stack_env: dict[str, str], client: Client
) -> None:
    mail = 'call send_email {"to": "x@example.com", "subject": "s", "body": "b"}'
    source = write_jsonl(
        tmp_path / "two.jsonl", [{"id": "m1", "prompt": mail}, {"id": "m2", "prompt": mail}]
    )
    out = tmp_path / "two-out.jsonl"
    process = subprocess.Popen(
        [SIGNOFF, "batch", "run", str(source), "--out", str(out)],
        env={**os.environ, **stack_env, "COLUMNS": "250"},
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    state_file = tmp_path / "two-out.jsonl.batch"
    deadline = time.monotonic() + 60
    while (
        not state_file.exists()
        or len(client.notifications.pending(batch_id=state_file.read_text().strip())) < 2
    ):
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    notes = client.notifications.pending(batch_id=state_file.read_text().strip())
    for note in notes:
        time.sleep(1.5)  # the progress looks every 0.5 s: it sees 2 waiting, then 1, then none
        client.resolve_notification(note.id, Allow(), actor="operator")
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert stderr.count("waiting for approval") == 1, stderr
    assert stderr.count("no approvals pending") == 1, stderr


def test_failed_items_fail_the_run(
    tmp_path: Path, stack_env: dict[str, str], worker: WorkerProcess
) -> None:
    source = write_jsonl(
        tmp_path / "fails.jsonl",
        [{"id": "ok", "prompt": "fine"}, {"id": "bad", "prompt": "please #fail"}],
    )
    out = tmp_path / "fails-out.jsonl"
    result = run_cli(stack_env, "batch", "run", str(source), "--out", str(out))
    assert result.returncode == 1, result.stderr
    assert f"1 of 2 items failed (failed 1); see {out}" in " ".join(result.stderr.split())
    assert [json.loads(line)["status"] for line in out.read_text().splitlines()] == [
        "done",
        "failed",
    ]


def test_an_item_with_a_denied_call_fails_the_run(
    tmp_path: Path, stack_env: dict[str, str], client: Client
) -> None:
    mail = 'call send_email {"to": "x@example.com", "subject": "s", "body": "b"}'
    source = write_jsonl(
        tmp_path / "deny.jsonl", [{"id": "ok", "prompt": "fine"}, {"id": "mail", "prompt": mail}]
    )
    out = tmp_path / "deny-out.jsonl"
    process = subprocess.Popen(
        [SIGNOFF, "batch", "run", str(source), "--out", str(out)],
        env={**os.environ, **stack_env, "COLUMNS": "250"},
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    state_file = tmp_path / "deny-out.jsonl.batch"
    deadline = time.monotonic() + 60
    while not state_file.exists() or not client.notifications.pending(
        batch_id=state_file.read_text().strip()
    ):
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    [note] = client.notifications.pending(batch_id=state_file.read_text().strip())
    client.resolve_notification(note.id, Deny(reason="not today"), actor="operator")
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr
    assert "1 of 2 items failed (denied 1)" in " ".join(stderr.split())
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["status"], r["denied"]) for r in results] == [("done", 0), ("done", 1)]


def test_malformed_lines_are_reported_and_the_rest_runs(
    tmp_path: Path, stack_env: dict[str, str], worker: WorkerProcess
) -> None:
    source = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"id": "a", "prompt": "fine one"},
            "{not json",
            "[1, 2]",
            {"id": "b"},
            {"id": "c", "prompt": "\u0000\u0001"},
            {"id": "a", "prompt": "duplicate id"},
            "",
            {"id": "d", "prompt": "fine two"},
        ],
    )
    out = tmp_path / "bad-out.jsonl"
    result = run_cli(stack_env, "batch", "run", str(source), "--out", str(out))
    assert result.returncode == 0, result.stderr
    for line in (2, 3, 4, 5, 6):
        assert f"skipped line {line}" in result.stderr
    assert "missing 'prompt'" in result.stderr and "duplicate id 'a'" in result.stderr
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in results] == [
        "done",
        "invalid",
        "invalid",
        "invalid",
        "invalid",
        "invalid",
        "done",
    ]
    assert "fine two" in results[-1]["text"] and results[1]["error"].startswith("line 2: not JSON")


def test_lines_carry_their_own_prompt_options(
    tmp_path: Path, stack_env: dict[str, str], worker: WorkerProcess
) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    source = write_jsonl(
        tmp_path / "options.jsonl",
        [
            {"id": "no-tools", "prompt": "call get_time {}", "tool_selection": "none"},
            {"id": "schema", "prompt": "rate this", "response_schema": schema},
            {"id": "plain", "prompt": "call get_time {}"},
            {"id": "bad", "prompt": "x", "timeout_s": -1},
            {"id": "short", "prompt": "#slow #long", "timeout_s": 0.3},
        ],
    )
    out = tmp_path / "options-out.jsonl"
    result = run_cli(stack_env, "batch", "run", str(source), "--out", str(out))
    assert "skipped line 4" in result.stderr and "timeout_s" in result.stderr, result.stderr
    results = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert "not to use tools" in results["no-tools"]["text"]
    assert isinstance(results["schema"]["structured_output"]["answer"], str)
    assert "get_time returned" in results["plain"]["text"]
    assert results["plain"]["structured_output"] is None
    assert results["bad"]["status"] == "invalid"
    assert results["short"]["status"] == "failed" and "timed out" in results["short"]["error"]


def test_run_again_resumes_without_duplicates(
    tmp_path: Path, stack_env: dict[str, str], worker: WorkerProcess
) -> None:
    source = write_jsonl(tmp_path / "again.jsonl", [{"prompt": f"p{i}"} for i in range(6)])
    out = tmp_path / "again-out.jsonl"
    first = run_cli(stack_env, "batch", "run", str(source), "--out", str(out), "--no-wait")
    assert first.returncode == 0 and "submitted 6" in first.stderr
    second = run_cli(stack_env, "batch", "run", str(source), "--out", str(out))
    assert second.returncode == 0 and "submitted 0, already there 6" in second.stderr
    assert len(out.read_text().splitlines()) == 6


def test_cancel_a_batch(tmp_path: Path, stack_env: dict[str, str], client: Client) -> None:
    source = write_jsonl(
        tmp_path / "slow.jsonl", [{"prompt": f"slow {i} #slow #long"} for i in range(12)]
    )
    submitted = run_cli(
        stack_env,
        "batch",
        "run",
        str(source),
        "--out",
        str(tmp_path / "o.jsonl"),
        "--max-concurrency",
        "2",
        "--no-wait",
    )
    bid = submitted.stdout.strip()
    time.sleep(0.5)
    cancelled = run_cli(stack_env, "batch", "cancel", bid)
    assert cancelled.returncode == 0 and f"cancelled batch {bid}" in cancelled.stdout
    store = batches(client)
    deadline = time.monotonic() + 30
    while store.info(bid).finished < 12 and time.monotonic() < deadline:
        time.sleep(0.1)
    info = store.info(bid)
    assert info.status is BatchStatus.CANCELLED and info.finished == 12
    assert info.counts[BatchState.CANCELLED] >= 10
    results = [
        json.loads(line) for line in run_cli(stack_env, "batch", "results", bid).stdout.splitlines()
    ]
    assert len(results) == 12 and {r["status"] for r in results} <= {"cancelled", "done"}


def test_unknown_batch_is_a_clear_error(stack_env: dict[str, str], worker: WorkerProcess) -> None:
    result = run_cli(stack_env, "batch", "status", "nosuchbatch")
    assert result.returncode == 2 and "batch nosuchbatch does not exist" in result.stderr


@pytest.fixture
def limited_env(redis_server: EmbeddedRedis) -> Iterator[dict[str, str]]:
    yield {
        "SIGNOFF_REDIS_URL": redis_server.url,
        "SIGNOFF_KEY_PREFIX": f"rl{uuid.uuid4().hex[:8]}",
        "SIGNOFF_RATE_LIMITS": json.dumps({"scripted": {"requests_per_minute": 120, "burst_s": 1}}),
    }


def test_rate_limit_holds_across_two_workers(limited_env: dict[str, str]) -> None:
    workers = [WorkerProcess(limited_env, concurrency=4, name=f"rl{i}").start() for i in range(2)]
    settings = Settings(
        redis_url=limited_env["SIGNOFF_REDIS_URL"], key_prefix=limited_env["SIGNOFF_KEY_PREFIX"]
    )
    try:
        with Client(settings) as client:
            conversations = [client.new_conversation() for _ in range(10)]
            turns = [(c, c.send(f"limited {i}")) for i, c in enumerate(conversations)]
            for conversation, turn in turns:
                conversation.wait_for_turn(turn, timeout=60)
            starts = sorted(first_model_event_ms(client, c.conversation_id) for c in conversations)
    finally:
        for process in workers:
            process.stop()
    assert all("advance" in w.log() for w in workers)  # both workers took part
    span_s = (starts[-1] - starts[0]) / 1000
    assert span_s >= 3.5  # 10 calls at 2 per second with a burst of 2
    for i, start in enumerate(starts):
        in_window = [s for s in starts[i:] if s - start < 1000]
        assert len(in_window) <= 4  # a token bucket allows its burst plus a second's refill


def first_model_event_ms(client: Client, cid: str) -> int:
    for event in client.events.after(cid):
        if isinstance(event, StepEvent) and event.step.thinking_delta:
            return int((event.id or "0-0").split("-")[0])
    raise AssertionError(f"no model output in {cid}")


def test_sticky_allow_covers_the_rest_of_the_batch(
    stack_env: dict[str, str], client: Client
) -> None:
    from shared.models.batches import BatchConfig
    from shared.models.config import ConversationConfig
    from shared.models.content import Content
    from shared.store.batches import BatchLine

    store = batches(client)
    config = BatchConfig(
        conversation=ConversationConfig(tools={"calculator": "ask"}), max_concurrency=1
    )
    bid = store.create(config)
    lines = [
        BatchLine(i, f"calc-{i}", Content.from_text(f'call calculator {{"expression": "{i}+1"}}'))
        for i in range(1, 4)
    ]
    store.submit(bid, lines)
    store.finish_submission(bid)
    deadline = time.monotonic() + 20
    while not client.notifications.pending(batch_id=bid) and time.monotonic() < deadline:
        time.sleep(0.05)
    note = client.notifications.pending(batch_id=bid)[0]
    client.resolve_notification(note.id, Allow(sticky="batch"), actor="operator")
    while store.info(bid).status is not BatchStatus.DONE and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.info(bid).counts[BatchState.DONE] == 3
    assert client.notifications.count_pending(batch_id=bid) == 0
    texts = [r["text"] for r in store.results(bid)]
    assert all("calculator returned" in t for t in texts)
    actors = {e["actor"] for e in client.notifications.audit(count=50) if e["tool"] == "calculator"}
    assert "operator" in actors and actors <= {"operator", "operator (sticky batch)"}


def test_results_as_csv_from_the_cli(
    tmp_path: Path, stack_env: dict[str, str], worker: WorkerProcess
) -> None:
    source = write_jsonl(
        tmp_path / "csv.jsonl",
        [{"id": "=1+1", "prompt": "fine, with a comma"}, {"id": "b", "prompt": "please #fail"}],
    )
    out = tmp_path / "csv-out.jsonl"
    run_cli(stack_env, "batch", "run", str(source), "--out", str(out))
    bid = (tmp_path / "csv-out.jsonl.batch").read_text().strip()
    printed = run_cli(stack_env, "batch", "results", bid, "--format", "csv")
    assert printed.returncode == 0, printed.stderr
    rows = list(csv.DictReader(io.StringIO(printed.stdout)))
    assert [(r["id"], r["status"]) for r in rows] == [("'=1+1", "done"), ("b", "failed")]
    assert "fine, with a comma" in rows[0]["answer"] and int(rows[0]["tokens"]) > 0
    target = tmp_path / "results.csv"
    written = run_cli(stack_env, "batch", "results", bid, "--format", "csv", "--out", str(target))
    assert written.returncode == 0 and "wrote 2 results" in written.stderr
    assert target.read_bytes() == printed.stdout.encode().replace(b"\n", b"\r\n")


def test_a_csv_file_with_a_template(
    tmp_path: Path, stack_env: dict[str, str], client: Client
) -> None:
    source = tmp_path / "tickets.csv"
    source.write_text('id,subject,body\nt1,Printer,"on fire, really"\nt2,Mouse,{body.__class__}\n')
    out = tmp_path / "tickets-out.jsonl"
    template = "Classify: {subject}\\n{body}"  # as typed in a shell: \n is a newline
    result = run_cli(
        stack_env, "batch", "run", str(source), "--out", str(out), "--template", template
    )
    assert result.returncode == 0, result.stderr
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["status"], r["line"]) for r in results] == [
        ("t1", "done", 2),
        ("t2", "done", 3),
    ]
    assert "Classify: Printer on fire, really" in results[0]["text"]
    store, bid = batches(client), (tmp_path / "tickets-out.jsonl.batch").read_text().strip()
    item = json.loads(client.redis.lindex(client.keys.batch_items(bid), 0))
    turn = store.conversations.turn(item["conversation_id"], item["turn_id"])
    assert turn.prompt.text == "Classify: Printer\non fire, really"
    assert "{body.__class__}" in results[1]["text"]  # a cell is copied, never evaluated


def test_a_csv_file_missing_a_column_queues_nothing(
    tmp_path: Path, stack_env: dict[str, str], client: Client
) -> None:
    store = batches(client)
    before = store.ids(limit=1000)
    source = tmp_path / "short.csv"
    source.write_text("id,subject,body\nt1,a,b\nt2,only a subject\nt3,x,y\n")
    out = tmp_path / "short-out.jsonl"
    args = ("batch", "run", str(source), "--out", str(out), "--template", "{subject}: {body}")
    result = run_cli(stack_env, *args)
    said = " ".join(result.stderr.split())
    assert result.returncode == 1, result.stderr
    assert "line 3: no value for column 'body'" in said and "nothing was submitted" in said
    header = run_cli(
        stack_env,
        "batch",
        "run",
        str(source),
        "--out",
        str(out),
        "--template",
        "{subject} {priority}",
    )
    assert header.returncode == 1
    assert "line 1: no column 'priority', which the template names" in header.stderr
    bad = run_cli(
        stack_env, "batch", "run", str(source), "--out", str(out), "--template", "{subject[0]}"
    )
    assert bad.returncode == 1 and "no attribute or index access" in bad.stderr
    jsonl = run_cli(
        stack_env,
        "batch",
        "run",
        str(write_jsonl(tmp_path / "x.jsonl", [])),
        "--out",
        str(out),
        "--template",
        "{subject}",
    )
    assert jsonl.returncode == 1 and "--template names CSV columns" in jsonl.stderr
    assert store.ids(limit=1000) == before and not (tmp_path / "short-out.jsonl.batch").exists()
