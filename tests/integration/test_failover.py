"""A primary killed mid-batch under Sentinel: the replica takes over, nothing is lost or done
twice. Real redis-servers (a primary, two replicas, a Sentinel), a real worker and beat, the
CLI's batch run, an operator resolving from another process's client."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from shared.client import Client
from shared.errors import Conflict, SignoffError
from shared.local.embedded_redis import EmbeddedRedis, find_redis_server, free_port
from shared.models.notifications import Allow
from shared.settings import Settings
from tests.stack import ROOT, SIGNOFF, BeatProcess, WorkerProcess, run_cli

# one Redis: a primary and its replica under Sentinel
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]

EFFECT_TOOLS = True
ITEMS = 24
MASTER = "signoff"


class SentinelSet:
    """A primary, two replicas and one Sentinel (quorum 1) on free ports."""

    def __init__(self) -> None:
        self.primary = EmbeddedRedis().start()
        self.replicas = [EmbeddedRedis().start() for _ in range(2)]
        for replica in self.replicas:
            redis.Redis(port=replica.port).replicaof("127.0.0.1", self.primary.port)
        self.port = free_port()
        folder = Path(tempfile.mkdtemp(prefix="signoff-sentinel-"))
        config = folder / "sentinel.conf"
        config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {folder}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {self.primary.port} 1\n"
            f"sentinel down-after-milliseconds {MASTER} 1000\n"
            f"sentinel failover-timeout {MASTER} 4000\n"
        )
        self.process = subprocess.Popen(
            [find_redis_server(), str(config), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.sentinel = redis.Redis(port=self.port, decode_responses=True)
        self._until(lambda: len(self.sentinel.sentinel_slaves(MASTER)) == 2, "replicas known")
        self._until(
            lambda: all(
                redis.Redis(port=r.port).info("replication")["master_link_status"] == "up"
                for r in self.replicas
            ),
            "replicas in sync",
        )

    def primary_port(self) -> int:
        return int(self.sentinel.sentinel_get_master_addr_by_name(MASTER)[1])

    def _until(self, ready: object, what: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if ready():  # type: ignore[operator]
                    return
            except redis.RedisError:
                pass
            assert time.monotonic() < deadline, f"sentinel set-up: {what} not in {timeout_s} s"
            time.sleep(0.1)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        for server in (self.primary, *self.replicas):
            server.stop(kill=True)


@pytest.fixture(scope="module")
def sentinels() -> Iterator[SentinelSet]:
    found = SentinelSet()
    yield found
    found.stop()


@pytest.fixture(scope="module")
def failover_env(stack_env: dict[str, str], sentinels: SentinelSet) -> dict[str, str]:
    return {
        **stack_env,
        "SIGNOFF_REDIS_URL": "redis://127.0.0.1:1/0",  # only its database counts here
        "SIGNOFF_REDIS_SENTINELS": f"127.0.0.1:{sentinels.port}",
        "SIGNOFF_REDIS_SENTINEL_MASTER": MASTER,
        "SIGNOFF_REDIS_WAIT_REPLICAS": "1",
        "SIGNOFF_REDIS_TIMEOUT_S": "2",
        "SIGNOFF_LEASE_TTL_MS": "3000",
        "SIGNOFF_SWEEP_INTERVAL_S": "1",
        "SIGNOFF_TEST_EFFECT_DELAY_S": "0.05",
    }


def _settings(env: dict[str, str]) -> Settings:
    return Settings(
        redis_url=env["SIGNOFF_REDIS_URL"],
        redis_sentinels=env["SIGNOFF_REDIS_SENTINELS"],
        redis_wait_replicas=1,
        redis_timeout_s=2,
        key_prefix=env["SIGNOFF_KEY_PREFIX"],
    )


def _resolve_everything(client: Client, stop: threading.Event, resolved: list[str]) -> None:
    """An operator allowing each request as it comes, retrying through the failover."""
    while not stop.is_set():
        try:
            pending = client.notifications.pending_ids(limit=100)
        except SignoffError:
            time.sleep(0.1)
            continue
        for nid in pending:
            try:
                client.resolve_notification(nid, Allow(), actor="operator")
                resolved.append(nid)
            except Conflict:
                pass  # settled already: the acknowledged resolution survived
            except SignoffError:
                time.sleep(0.1)  # the primary is away: the request stays pending, retried
        time.sleep(0.05)


def test_killing_the_primary_mid_batch_loses_no_prompt_approval_or_tool_call(
    failover_env: dict[str, str], sentinels: SentinelSet, effects: Path, tmp_path: Path
) -> None:
    worker = WorkerProcess(failover_env, concurrency=8).start()
    beat = BeatProcess(failover_env).start()
    source = tmp_path / "items.jsonl"
    lines = [
        {"id": f"i{n}", "prompt": f'call record_effect {{"note": "item-{n}"}}'}
        for n in range(ITEMS)
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    run = subprocess.Popen(
        [
            SIGNOFF,
            "batch",
            "run",
            str(source),
            "--out",
            str(out),
            "--tools",
            json.dumps({"record_effect": "ask"}),
        ],
        cwd=ROOT,
        env={**os.environ, **failover_env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop, resolved = threading.Event(), []
    with Client(_settings(failover_env)) as client:
        operator = threading.Thread(target=_resolve_everything, args=(client, stop, resolved))
        operator.start()
        try:
            deadline = time.monotonic() + 120
            while len(resolved) < ITEMS // 3:
                assert time.monotonic() < deadline, f"only {len(resolved)} resolved before the kill"
                time.sleep(0.05)
            old = sentinels.primary_port()
            next(s for s in (sentinels.primary, *sentinels.replicas) if s.port == old).stop(
                kill=True
            )
            stdout, stderr = run.communicate(timeout=240)
        finally:
            stop.set()
            operator.join()
            run.kill()
            beat.stop()
            worker.stop()
        assert sentinels.primary_port() != old  # a replica took over
        doctor = run_cli(failover_env, "doctor")
        assert f"127.0.0.1:{sentinels.primary_port()}, the primary of 'signoff'" in doctor.stdout
        assert run.returncode == 0, stdout + stderr + worker.log()[-4000:]
        results = [json.loads(line) for line in out.read_text().splitlines()]
        assert sorted(r["id"] for r in results) == sorted(line["id"] for line in lines)
        assert {r["status"] for r in results} == {"done"}, results
        runs = Counter(line.split(" ", 1)[1] for line in effects.read_text().splitlines())
        assert set(runs.values()) <= {1}, runs  # no tool ran twice
        unknown = [r for r in results if "its effect is unknown" in r["text"]]
        for result in results:
            note = f"item-{result['id'][1:]}"
            # a call in flight as the primary died may have run or not: it says its effect is
            # unknown, and is never run again; every other call ran once and returned
            if result not in unknown:
                assert runs[note] == 1 and f'"recorded": "{note}"' in result["text"], result
        # a leg that only lost its connection settles its claim once the new primary answers
        # (none of 24 unknown in five runs here; a failover slower than the settle's few
        # seconds of tries leaves its calls unknown, never run twice)
        assert len(unknown) < ITEMS // 2, unknown
        settled = Counter(resolved)
        assert all(count == 1 for count in settled.values()), settled  # none resolved twice
