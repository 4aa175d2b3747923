"""`signoff batch run` rides out a Redis restart, and gives up clearly past its limit.

Each test has its own redis-server with AOF on (as in production), killed with SIGKILL
while the CLI follows a batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared.client import Client
from shared.errors import StorageError
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.batches import BatchState
from shared.settings import Settings
from shared.store.batches import BatchStore
from tests.integration.test_batches import write_jsonl
from tests.integration.test_expiry import BeatProcess
from tests.stack import ROOT, SIGNOFF, WorkerProcess

# one Redis: restarts the one Redis
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]

ITEMS = 12
RETRY_LINE = "Redis unavailable, retrying"


@pytest.fixture
def durable_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(data_dir=tmp_path_factory.mktemp("aof"), appendonly=True).start()
    yield server
    server.stop()


def env_for(server: EmbeddedRedis, **extra: str) -> dict[str, str]:
    return {
        "SIGNOFF_REDIS_URL": server.url,
        "SIGNOFF_KEY_PREFIX": f"br{uuid.uuid4().hex[:6]}",
        "SIGNOFF_LEASE_TTL_MS": "1500",
        "SIGNOFF_SWEEP_INTERVAL_S": "0.5",
        "COLUMNS": "250",
        **extra,
    }


class BatchRun:
    """`signoff batch run` as a child, its stderr collected line by line in a thread."""

    def __init__(self, env: dict[str, str], source: Path, out: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [SIGNOFF, "batch", "run", str(source), "--out", str(out), *args],
            env={**os.environ, **env},
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.stderr:
            assert self.process.poll() is None, f"exited before {text!r}:\n{self.stderr}"
            assert time.monotonic() < deadline, f"no {text!r} in time:\n{self.stderr}"
            time.sleep(0.02)

    def finish(self, timeout_s: float = 90.0) -> int:
        code = self.process.wait(timeout=timeout_s)
        self.reader.join(timeout=5)
        return code


def eventually(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if condition():
                return
        except StorageError:
            pass
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def stalled(
    settings: Settings, bid: str, worker: WorkerProcess, beat: BeatProcess, run: BatchRun
) -> str:
    """What a batch that did not finish looks like, for the failure message."""
    with Client(settings) as client:
        states = client.redis.hgetall(client.keys.batch_states(bid))
        unfinished = {cid: state for cid, state in states.items() if state in ("running", "queued")}
        conversations = {
            cid: (
                client.redis.hgetall(client.keys.conversation(cid)),
                client.redis.lrange(client.keys.inbox(cid), 0, -1),
                client.redis.get(client.keys.lease(cid)),
            )
            for cid in unfinished
        }
        meta = client.redis.hgetall(client.keys.batch(bid))
    return (
        f"batch {bid} stalled: {meta}\n{unfinished}\n{conversations}\n"
        f"CLI:\n{run.stderr[-3000:]}\nworker:\n{worker.log()[-6000:]}\nbeat:\n{beat.log()[-3000:]}"
    )


def test_batch_run_waits_for_a_restarted_redis_and_finishes(
    tmp_path: Path, durable_redis: EmbeddedRedis
) -> None:
    env = env_for(durable_redis)
    settings = Settings(redis_url=env["SIGNOFF_REDIS_URL"], key_prefix=env["SIGNOFF_KEY_PREFIX"])
    worker = WorkerProcess(env, concurrency=4, name="through").start()
    beat = BeatProcess(env).start()
    rows: list[object] = [{"id": f"r{i}", "prompt": f"restart {i} #slow"} for i in range(ITEMS)]
    source, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    run = BatchRun(env, source, out, "--max-concurrency", "3")
    try:
        run.wait_for(f"submitted {ITEMS}")
        bid = (tmp_path / "out.jsonl.batch").read_text().strip()
        with Client(settings) as client:
            store = BatchStore(client.redis, client.keys, settings)
            eventually(lambda: store.info(bid).counts[BatchState.DONE] >= 2)
            assert store.info(bid).finished < ITEMS, "the batch finished before Redis went away"
        durable_redis.stop(kill=True)
        run.wait_for(RETRY_LINE, timeout_s=20)
        time.sleep(1.0)  # the CLI keeps retrying while Redis is away
        assert run.process.poll() is None, run.stderr
        durable_redis.start()
        # kombu 5.7 may take the Celery worker down when its broker vanishes mid-task
        # ("Unrecoverable error: AttributeError ... 'hostname'"); a supervisor (compose's
        # restart policy) starts it again. The CLI under test must not care either way.
        if worker.process is not None and worker.process.poll() is not None:
            worker = WorkerProcess(env, concurrency=4, name="through-again").start()
        try:
            code = run.finish()
        except subprocess.TimeoutExpired:
            raise AssertionError(stalled(settings, bid, worker, beat, run)) from None
    finally:
        if run.process.poll() is None:
            run.process.kill()
        beat.stop()
        worker.stop()
    assert code == 0, run.stderr
    assert "Redis is back after" in run.stderr
    assert run.stderr.count(RETRY_LINE) == 1
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in results] == [f"r{i}" for i in range(ITEMS)]
    assert [r["status"] for r in results] == ["done"] * ITEMS, results
    assert all(f"restart {i}" in r["text"] for i, r in enumerate(results))


def test_batch_run_gives_up_clearly_past_its_limit(
    tmp_path: Path, durable_redis: EmbeddedRedis
) -> None:
    env = env_for(durable_redis, SIGNOFF_REDIS_RETRY_S="2")
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "only", "prompt": "no worker runs me"}])
    run = BatchRun(env, source, tmp_path / "out.jsonl")  # no worker: it follows forever
    try:
        run.wait_for("submitted 1")
        durable_redis.stop(kill=True)
        run.wait_for(RETRY_LINE, timeout_s=20)
        started = time.monotonic()
        code = run.finish(timeout_s=30)
        waited_s = time.monotonic() - started
    finally:
        if run.process.poll() is None:
            run.process.kill()
        durable_redis.start()
    assert code == 1, run.stderr
    assert "error: Redis still unavailable after 2s of retrying (SIGNOFF_REDIS_RETRY_S=2)" in (
        run.stderr
    )
    assert f"following batch {(tmp_path / 'out.jsonl.batch').read_text().strip()}" in run.stderr
    assert waited_s < 10
    assert not (tmp_path / "out.jsonl").exists()
