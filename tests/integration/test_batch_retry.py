"""Retrying a batch's ended items with a real worker: exactly the items chosen run again, as
new attempts, under the batch's cap, and the batch's counts and usage add up (10 failing items
of 100 retried)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.client import Client
from shared.models.batches import BatchState, BatchStatus
from shared.models.notifications import Allow, Deny
from shared.store.batches import BatchInfo, BatchStore
from tests.stack import run_cli

MAIL = 'call send_email {"to": "x@example.com", "subject": "s", "body": "b"}'


def batches(client: Client) -> BatchStore:
    return BatchStore(client.redis, client.keys, client.settings, client.tasks)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def until(probe: Callable[[], Any], what: str, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def results(stack_env: dict[str, str], bid: str) -> list[dict[str, Any]]:
    printed = run_cli(stack_env, "batch", "results", bid)
    assert printed.returncode == 0, printed.stderr
    return [json.loads(line) for line in printed.stdout.splitlines()]


def tokens(client: Client, cid: str) -> int:
    return int(client.redis.hget(client.keys.usage(cid), "total_token_count") or 0)


def ended(store: BatchStore, bid: str) -> BatchInfo:
    return until(lambda: (i := store.info(bid)).status is BatchStatus.DONE and i, f"{bid} done")


def test_retry_of_the_failed_items_runs_exactly_those_again(
    tmp_path: Path, stack_env: dict[str, str], client: Client
) -> None:
    """The issue's case: a batch of 100 with 10 failing items."""
    items, failing = 100, set(range(3, 100, 10))
    rows = [
        {"id": f"i{n}", "prompt": f"item {n}" + (" please #fail" if n in failing else "")}
        for n in range(items)
    ]
    out = tmp_path / "out.jsonl"
    first = run_cli(
        stack_env,
        "batch",
        "run",
        str(write_jsonl(tmp_path / "in.jsonl", rows)),
        "--out",
        str(out),
        "--max-concurrency",
        "4",
    )
    assert first.returncode == 1, first.stderr
    bid, store = (tmp_path / "out.jsonl.batch").read_text().strip(), batches(client)
    before = store.info(bid)
    assert before.counts[BatchState.FAILED] == 10 and before.usage.total_token_count > 0
    again = run_cli(stack_env, "batch", "retry", bid, "--status", "failed", "--wait")
    assert again.returncode == 1, again.stderr  # they fail again, and it says so
    assert f"retrying 10 items of batch {bid} as new attempts" in again.stdout
    assert "10 of 100 items failed (failed 10)" in " ".join(again.stderr.split())
    after = store.info(bid)
    assert after.status is BatchStatus.DONE and after.total == items and after.retries == 1
    assert (after.counts[BatchState.DONE], after.counts[BatchState.FAILED]) == (90, 10)
    assert after.finished == items
    found = results(stack_env, bid)
    assert [r["attempts"] for r in found] == [2 if n in failing else 1 for n in range(items)]
    retried = [r for r in found if r["attempts"] == 2]
    assert all(r["status"] == "failed" and "scripted failure" in r["error"] for r in retried)
    for n, result in enumerate(found):
        first_attempt = store.conversation_id(bid, f"i{n}")
        assert client.redis.llen(client.keys.turn_starts(first_attempt)) == 1  # ran once there
        second = store.conversation_id(bid, f"i{n}", 2)
        assert result["conversation_id"] == (second if n in failing else first_attempt)
        assert client.redis.exists(client.keys.conversation(second)) == (n in failing)
    new_usage = sum(tokens(client, r["conversation_id"]) for r in retried)  # 0: #fail counts none
    assert after.usage.total_token_count == before.usage.total_token_count + new_usage
    by_tool = run_cli(stack_env, "batch", "retry", bid, "--item", "i3", "--tool", "calculator")
    assert by_tool.returncode == 0 and "nothing to retry" in by_tool.stdout  # no calls read
    bad = run_cli(stack_env, "batch", "retry", bid, "--tool", "no tool")
    assert bad.returncode == 1 and "tool" in bad.stderr
    one = run_cli(stack_env, "batch", "retry", bid, "--item", "i3", "--item", "i4", "--wait")
    assert "retrying 1 items" in one.stdout  # i4 succeeded: nothing to retry there
    assert [r["attempts"] for r in results(stack_env, bid)][3:5] == [3, 1]


def test_a_denied_item_retried_and_allowed_ends_done(
    tmp_path: Path, stack_env: dict[str, str], client: Client
) -> None:
    rows = [{"id": "plain", "prompt": "hello"}, {"id": "mail", "prompt": MAIL}]
    out = tmp_path / "deny.jsonl"
    submitted = run_cli(
        stack_env,
        "batch",
        "run",
        str(write_jsonl(tmp_path / "d.jsonl", rows)),
        "--out",
        str(out),
        "--no-wait",
    )
    bid, store = submitted.stdout.strip(), batches(client)
    [note] = until(lambda: client.notifications.pending(batch_id=bid), "the approval")
    client.resolve_notification(note.id, Deny(reason="not today"), actor="operator")
    before = ended(store, bid)
    assert before.denied == 1
    plain_only = run_cli(stack_env, "batch", "retry", bid, "--status", "failed")
    assert plain_only.returncode == 0 and "nothing to retry" in plain_only.stdout
    again = run_cli(stack_env, "batch", "retry", bid, "--status", "denied", "--error", "TODAY")
    assert f"retrying 1 items of batch {bid}" in again.stdout, again.stderr
    [second] = until(lambda: client.notifications.pending(batch_id=bid), "the second approval")
    assert second.conversation_id == store.conversation_id(bid, "mail", 2)
    client.resolve_notification(second.id, Allow(), actor="operator")
    after = ended(store, bid)
    assert after.denied == 0 and after.counts[BatchState.DONE] == 2 and after.retries == 1
    mail = results(stack_env, bid)[1]
    assert (mail["attempts"], mail["denied"], mail["denials"]) == (2, 0, [])
    assert "send_email returned" in mail["text"]
    assert mail["usage"]["total_token_count"] == tokens(client, second.conversation_id) > 0
    assert after.usage.total_token_count == (
        before.usage.total_token_count + mail["usage"]["total_token_count"]
    )


def test_cancelled_items_retried_run_under_the_cap(
    tmp_path: Path, stack_env: dict[str, str], client: Client
) -> None:
    rows = [{"id": f"s{n}", "prompt": f"slow {n} #slow"} for n in range(5)]
    submitted = run_cli(
        stack_env,
        "batch",
        "run",
        str(write_jsonl(tmp_path / "s.jsonl", rows)),
        "--out",
        str(tmp_path / "s-out.jsonl"),
        "--max-concurrency",
        "1",
        "--no-wait",
    )
    bid, store = submitted.stdout.strip(), batches(client)
    until(lambda: store.info(bid).counts[BatchState.RUNNING] == 1, "one running")
    store.cancel(bid)  # at once: a CLI process could start after the slow items ended
    cancelled = until(lambda: (i := store.info(bid)).finished == 5 and i, "the cancel")
    assert cancelled.status is BatchStatus.CANCELLED
    gone = cancelled.counts[BatchState.CANCELLED]
    assert gone >= 4
    retried = run_cli(stack_env, "batch", "retry", bid, "--status", "cancelled")
    assert f"retrying {gone} items" in retried.stdout, retried.stderr
    running: list[int] = []

    def finished() -> bool:
        info = store.info(bid)
        running.append(info.counts[BatchState.RUNNING])
        return info.status is BatchStatus.DONE

    until(finished, "the retried items")
    assert max(running) == 1  # the batch's cap, as for its first attempts
    assert store.info(bid).counts[BatchState.DONE] == 5
