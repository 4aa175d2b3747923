"""A worker cut from Redis mid-turn by a network partition, then healed (issue 32 item 4).

The worker runs in a network namespace of its own (`ip netns`), reaching the stack's Redis
over a veth pair; taking the pair's host end down cuts it off with its connections open and
its process running, as a partition does (unlike a kill). Its lease lapses, the beat's sweep
hands the turn to a second worker, and once the link is back the first worker's late writes
are refused by the fencing token: the turn ended once, the tool ran once, and nothing was
written after the heal.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from faults.checks import audit, effect_runs
from faults.harness import Service, Stack, _durable_popen
from shared.models.events import TurnStatus
from shared.store.history import HistoryStore
from tests.stack import effect_prompt

# one Redis: cuts a worker from the one Redis
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]

TOOL_S = 10.0  # the tool's run: longer than the other worker takes to end the turn
LEASE_LOST = "lease lost; another worker continues"  # worker/runtime.py, when fenced


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@dataclass(frozen=True)
class Namespace:
    """A network namespace joined to this one by a veth pair (a /30 of its own)."""

    name: str
    host_ip: str
    inner_ip: str

    @property
    def host_end(self) -> str:
        return f"vh{self.name[-8:]}"

    def cut(self) -> None:
        """Blackhole routes both ways: packets vanish, connections stay open and hang (TCP
        retransmits), as across a real partition; new connections fail."""
        _ip("route", "add", "blackhole", f"{self.inner_ip}/32")
        _ip("netns", "exec", self.name, "ip", "route", "add", "blackhole", f"{self.host_ip}/32")

    def heal(self) -> None:
        _ip("route", "del", "blackhole", f"{self.inner_ip}/32")
        _ip("netns", "exec", self.name, "ip", "route", "del", "blackhole", f"{self.host_ip}/32")


@pytest.fixture
def namespace() -> Iterator[Namespace]:
    tag = f"{os.getpid() % 250}{time.monotonic_ns() % 1000:03d}"[-8:]
    third = int(tag) % 250
    found = Namespace(f"sopart{tag}", f"10.231.{third}.1", f"10.231.{third}.2")
    inner_end = f"vn{tag}"
    _ip("netns", "add", found.name)
    try:
        _ip("link", "add", found.host_end, "type", "veth", "peer", "name", inner_end)
        _ip("link", "set", inner_end, "netns", found.name)
        _ip("addr", "add", f"{found.host_ip}/30", "dev", found.host_end)
        _ip("link", "set", found.host_end, "up")
        inside = ("netns", "exec", found.name, "ip")
        _ip(*inside, "addr", "add", f"{found.inner_ip}/30", "dev", inner_end)
        _ip(*inside, "link", "set", inner_end, "up")
        _ip(*inside, "link", "set", "lo", "up")
        yield found
    finally:
        subprocess.run(["ip", "netns", "del", found.name], capture_output=True, timeout=10)
        subprocess.run(["ip", "link", "del", found.host_end], capture_output=True, timeout=10)
        subprocess.run(
            ["ip", "route", "del", "blackhole", f"{found.inner_ip}/32"],
            capture_output=True,
            timeout=10,
        )


def _also_bound_to(address: str):  # type: ignore[no-untyped-def]
    """redis-server listening on `address` as well as loopback, AOF fsynced as the suite's."""

    def popen(command: list[str]) -> subprocess.Popen[bytes]:
        at = command.index("--bind") + 2
        # the veth's address is on this machine only: no password, so protected mode goes
        bound = [*command[:at], address, *command[at:], "--protected-mode", "no"]
        return _durable_popen(bound)

    return popen


def _cut_worker(built: Stack, namespace: Namespace) -> Service:
    url = built.redis.url.replace("127.0.0.1", namespace.host_ip)
    env = {
        **built.env,
        "SIGNOFF_REDIS_URL": url,
        "SIGNOFF_WORKER_CONCURRENCY": "2",
        # it waits out the partition on its open connections instead of giving up the leg
        "SIGNOFF_REDIS_TIMEOUT_S": "60",
    }
    command = ["ip", "netns", "exec", namespace.name, sys.executable, "-m", "worker", "worker"]
    service = Service("worker-cut", [*command, "-n", "cut@%h"], env, built.dir / "cut.log")
    built.services.append(service)
    return service.start()


def _wait(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_partitioned_worker_loses_its_turn_and_writes_nothing_after_the_heal(
    namespace: Namespace, tmp_path: Path
) -> None:
    built = Stack(
        "partition",
        tmp_path,
        SIGNOFF_SWEEP_INTERVAL_S="0.5",
        SIGNOFF_SCRIPTED_TOKEN_DELAY_MS="60",
        SIGNOFF_TEST_EFFECT_DELAY_S=str(TOOL_S),
    )
    built.redis.popen = _also_bound_to(namespace.host_ip)
    built.redis.start()
    try:
        with built.client() as client:
            cut = _cut_worker(built, namespace).wait_ready()
            built.beat().wait_ready()
            conversation = client.new_conversation(tools={"record_effect": "auto"})
            turn = conversation.send(effect_prompt("across-the-cut"))
            # Cut while the tool runs inside the namespace: its result is never written there.
            _wait(lambda: built.effects.exists(), 30, "the tool never started")
            namespace.cut()
            other = built.worker("other", concurrency=2).wait_ready()
            response = conversation.wait_for_turn(turn, timeout=60)
            assert response.text  # ended on the other worker, its lease taken over
            assert cut.alive, "the cut worker is partitioned, not dead"
            history = HistoryStore(client.redis, client.keys, conversation.conversation_id)
            steps, events = (
                len(history.snapshot().steps),
                client.redis.xlen(client.keys.events(conversation.conversation_id)),
            )

            namespace.heal()  # before the cut worker's tool returns: its writes come after
            _wait(lambda: LEASE_LOST in cut.log(), 60, "the cut worker wrote nothing back")
            time.sleep(1.0)  # whatever else it had queued
            assert len(history.snapshot().steps) == steps
            assert client.redis.xlen(client.keys.events(conversation.conversation_id)) == events
            found = audit(client, {conversation.conversation_id: [turn]}, built.effects)
            assert found.lost == found.duplicated == found.tools_twice == 0, found.problems
            assert found.stranded == found.usage_twice == 0, found.problems
            assert found.ended == {TurnStatus.COMPLETED.value: 1}, found
            assert effect_runs(built.effects, by=1) == {"across-the-cut": 1}
            assert other.alive
    finally:
        built.close()
