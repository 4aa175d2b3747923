"""A batch's concurrency cap holds against the sweep, any stray `advance`, and resumed items.

Submission queues each item's turn in its conversation, created held: no worker starts
it, whoever sends `advance` (`signoff beat` sweeping every half second, a redelivered
task), until the batch dispatches the item.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared.client import Client
from shared.models.batches import BatchConfig, BatchState, BatchStatus
from shared.models.content import Content
from shared.models.events import ConversationStatus
from shared.models.notifications import Allow
from shared.settings import Settings
from shared.store.batches import BatchLine, BatchStore
from tests.integration.test_batches import write_jsonl
from tests.integration.test_expiry import BeatProcess
from tests.stack import ROOT, SIGNOFF, WorkerProcess, members

ITEMS = 12
CAP = 2


STACK_ENV = {
    "SIGNOFF_SWEEP_INTERVAL_S": "0.5",
    "SIGNOFF_LEASE_TTL_MS": "3000",
}


@pytest.fixture
def signoff(stack_env: dict[str, str]) -> Iterator[Client]:
    settings = Settings(
        redis_url=stack_env["SIGNOFF_REDIS_URL"], key_prefix=stack_env["SIGNOFF_KEY_PREFIX"]
    )
    with Client(settings) as client:
        yield client


def store_of(client: Client) -> BatchStore:
    return BatchStore(client.redis, client.keys, client.settings, client.tasks)


def running_now(client: Client, bid: str) -> tuple[int, int]:
    """The batch's running count, and how many of its conversations are running a turn."""
    store = store_of(client)
    cids = [str(cid) for cid in client.redis.hkeys(client.keys.batch_states(bid))]
    statuses = client.store.statuses(cids)
    return store.info(bid).counts[BatchState.RUNNING], statuses.count(ConversationStatus.RUNNING)


def test_the_cap_holds_while_beat_sweeps(
    tmp_path: Path, stack_env: dict[str, str], signoff: Client
) -> None:
    worker = WorkerProcess(stack_env, concurrency=8, name="capped").start()
    beat = BeatProcess(stack_env).start()
    rows: list[object] = [{"id": f"s{i}", "prompt": f"item {i} #slow"} for i in range(ITEMS)]
    source = write_jsonl(tmp_path / "slow.jsonl", rows)
    out = tmp_path / "slow-out.jsonl"
    run = subprocess.Popen(
        [SIGNOFF, "batch", "run", str(source), "--out", str(out), "--max-concurrency", str(CAP)],
        env={**os.environ, **stack_env},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    samples: list[tuple[int, int]] = []
    state_file = out.with_name(out.name + ".batch")
    try:
        deadline = time.monotonic() + 90
        while run.poll() is None:
            assert time.monotonic() < deadline, "the batch did not finish"
            if state_file.exists() and state_file.read_text().strip():
                samples.append(running_now(signoff, state_file.read_text().strip()))
            time.sleep(0.02)
        _, stderr = run.communicate()
    finally:
        beat.stop()
        worker.stop()
    assert run.returncode == 0, stderr
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in results] == ["done"] * ITEMS
    assert max(counted for counted, _ in samples) == CAP
    assert max(running for _, running in samples) <= CAP, (
        f"{max(r for _, r in samples)} running at once",
        beat.log()[-2000:],
    )
    assert sum(1 for _, running in samples if running) > 20  # sampled while items ran


def test_a_stray_advance_does_not_start_an_undispatched_item(signoff: Client) -> None:
    """The claim itself refuses a held conversation, whoever sends the `advance`."""
    from worker.runtime import Runtime

    store = store_of(signoff)
    bid = store.create(BatchConfig(max_concurrency=1))
    store.submit(bid, [BatchLine(i, f"i{i}", Content.from_text(f"p{i}")) for i in range(3)])
    store.finish_submission(bid)
    first, second, third = (store.conversation_id(bid, f"i{i}") for i in range(3))
    held = [signoff.redis.hget(signoff.keys.conversation(c), "held") for c in (first, second)]
    assert held == [None, "1"]
    active = set(members(signoff, signoff.keys.active))
    assert first in active and second not in active and third not in active

    sent: list[str] = []
    runtime = Runtime(signoff.settings, signoff.redis, send_advance=sent.append)
    assert runtime.advance(second) == "held"  # a redelivered task, a second beat, anyone
    record = signoff.store.get(second)
    assert record.queued == 1 and record.active_turn == "" and not sent
    assert not signoff.redis.exists(signoff.keys.lease(second))
    assert store.info(bid).counts[BatchState.RUNNING] == 1
    assert store.info(bid).status is BatchStatus.RUNNING


RESUMED, RESUMED_CAP = 30, 4


def leases_held(client: Client, cids: list[str]) -> int:
    """How many of these conversations a worker holds the lease of, now."""
    with client.redis.pipeline(transaction=False) as pipe:
        for cid in cids:
            pipe.exists(client.keys.lease(cid))
        return sum(pipe.execute())


def test_resumed_items_wait_for_a_place_under_the_cap(
    stack_env: dict[str, str], signoff: Client
) -> None:
    """30 items park on approvals, all resolved at once: never more than the cap hold leases."""
    worker = WorkerProcess(stack_env, concurrency=16, name="resumes").start()
    store = store_of(signoff)
    bid = store.create(BatchConfig(max_concurrency=RESUMED_CAP))
    mail = 'call send_email {"to": "x@example.com", "subject": "s", "body": "b"} #slow'
    store.submit(bid, [BatchLine(i, f"m{i}", Content.from_text(mail)) for i in range(RESUMED)])
    store.finish_submission(bid)
    cids = [store.conversation_id(bid, f"m{i}") for i in range(RESUMED)]
    samples: list[int] = []

    def sample_until(done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 90
        while not done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            samples.append(leases_held(signoff, cids))
            time.sleep(0.01)

    try:
        sample_until(lambda: store.info(bid).counts[BatchState.WAITING] == RESUMED, "the parks")
        notes = signoff.notifications.pending(batch_id=bid, limit=100)
        assert len(notes) == RESUMED
        parked_samples = len(samples)
        for note in notes:
            signoff.resolve_notification(note.id, Allow(), actor="test")
        sample_until(lambda: store.info(bid).status is BatchStatus.DONE, "the batch's end")
    finally:
        worker.stop()
    info = store.info(bid)
    assert info.counts[BatchState.DONE] == RESUMED, info.counts
    resumed = samples[parked_samples:]
    assert max(samples) <= RESUMED_CAP, (max(samples), worker.log()[-2000:])
    assert sum(1 for held in resumed if held == RESUMED_CAP) > 10  # sampled while at the cap
    results = list(store.results(bid))
    assert all("send_email returned" in (r["text"] or "") for r in results), results[:2]
