"""Failover: what asynchronous replication loses when a primary dies, and what waiting for a
replica (`SIGNOFF_REDIS_WAIT_REPLICAS=1`, Redis WAIT) costs a prompt's acceptance and a tool
call's claim, against the same writes answered by the primary alone, in one run."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import redis

from bench.common import machine, median, percentile, write_section
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.config import ConversationConfig
from shared.models.content import Content
from shared.settings import Settings
from shared.store.connection import CLIENT_POOL, ReplicaWait, connect
from shared.store.conversations import ConversationStore
from shared.store.keys import KeySpace
from worker.tool_ledger import ToolLedger

KILLS = 5
LAG_S = 0.3
BLOCK = 200  # writes per alternated block
BLOCKS = 6


class Link:
    """The replication link as a relay this bench can hold: while held, what the primary
    sends is kept here, not passed on, as a slow or cut network would; dropped when closed."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.held = threading.Event()
        self.closed = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                downstream, _ = self.server.accept()
                up = socket.create_connection(("127.0.0.1", self.upstream))
                for end in (downstream, up):  # as Redis's own sockets: no Nagle delay
                    end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                threading.Thread(
                    target=self._pass, args=(downstream, up, False), daemon=True
                ).start()
                threading.Thread(
                    target=self._pass, args=(up, downstream, True), daemon=True
                ).start()

    def _pass(self, source: socket.socket, target: socket.socket, holdable: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65_536):
                while holdable and self.held.is_set() and not self.closed.is_set():
                    time.sleep(0.001)  # held: what came stays here, in this loop
                if self.closed.is_set():
                    break  # closed while held: what it kept is dropped
                target.sendall(data)
        for end in (source, target):
            end.close()

    def close(self) -> None:
        self.closed.set()
        self.server.close()


def _replicated_pair(*, relayed: bool) -> tuple[EmbeddedRedis, EmbeddedRedis, Link]:
    """A primary and its replica, linked through a `Link` when `relayed` (else directly)."""
    primary, replica = EmbeddedRedis().start(), EmbeddedRedis().start()
    link = Link(primary.port)
    admin = redis.Redis(port=replica.port)
    admin.replicaof("127.0.0.1", link.port if relayed else primary.port)
    while admin.info("replication")["master_link_status"] != "up":
        time.sleep(0.05)
    return primary, replica, link


def _lost_on_kill(wait: bool, lag_s: float = 0.0) -> tuple[int, int]:
    """Writers INCR a counter as fast as they can; the primary is SIGKILLed mid-stream and
    the replica promoted: acknowledged increments the replica does not have. With `lag_s`,
    the replica is stopped (SIGSTOP) that long before the kill: a replica behind."""
    primary, replica, link = _replicated_pair(relayed=True)
    acknowledged = [0] * 4
    stop = threading.Event()

    def write(n: int) -> None:
        client = redis.Redis(port=primary.port, socket_timeout=1)
        try:
            while not stop.is_set():
                with client.pipeline(transaction=False) as pipe:
                    pipe.incr(f"bench:counter:{n}")
                    if wait:
                        pipe.execute_command("WAIT", 1, 1000)
                    replies = pipe.execute()
                if not wait or int(replies[1]) >= 1:
                    acknowledged[n] = int(replies[0])
        except redis.RedisError:
            return

    threads = [threading.Thread(target=write, args=(n,)) for n in range(len(acknowledged))]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    if lag_s:
        link.held.set()
        time.sleep(lag_s)
    primary.stop(kill=True)
    stop.set()
    link.close()
    for thread in threads:
        thread.join()
    promoted = redis.Redis(port=replica.port)
    promoted.replicaof("NO", "ONE")
    kept = [int(promoted.get(f"bench:counter:{n}") or 0) for n in range(len(acknowledged))]
    replica.stop(kill=True)
    lost = sum(max(a - k, 0) for a, k in zip(acknowledged, kept, strict=True))
    return lost, sum(acknowledged)


def _latencies(url: str, wait_replicas: int) -> dict[str, list[float]]:
    settings = Settings(redis_url=url, key_prefix="bfo", redis_wait_replicas=wait_replicas)
    client = connect(settings, pool=CLIENT_POOL)
    keys = KeySpace("bfo")
    store = ConversationStore(client, keys, settings)
    cid = f"c{wait_replicas}{time.monotonic_ns()}"
    store.create(ConversationConfig(), conversation_id=cid)
    ledger = ToolLedger(client, keys, cid, ReplicaWait.of(settings))
    times: dict[str, list[float]] = {"submit": [], "claim": []}
    for n in range(BLOCK):
        started = time.perf_counter()
        store.submit(cid, Content.from_text(f"prompt {n}"))
        times["submit"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        ledger.claim(f"call-{wait_replicas}-{n}-{time.monotonic_ns()}")
        times["claim"].append((time.perf_counter() - started) * 1000)
    client.close()
    return times


def run() -> dict[str, float]:
    losses = [_lost_on_kill(wait=False) for _ in range(KILLS)]
    waited = [_lost_on_kill(wait=True) for _ in range(KILLS)]
    behind = [_lost_on_kill(wait=False, lag_s=LAG_S) for _ in range(KILLS)]
    behind_waited = [_lost_on_kill(wait=True, lag_s=LAG_S) for _ in range(KILLS)]
    primary, replica, link = _replicated_pair(relayed=False)
    url = f"redis://127.0.0.1:{primary.port}/0"
    alone: dict[str, list[float]] = {"submit": [], "claim": []}
    with_wait: dict[str, list[float]] = {"submit": [], "claim": []}
    for _ in range(BLOCKS):  # alternated, so that a busy spell of the machine hits both
        for name, values in _latencies(url, 0).items():
            alone[name] += values
        for name, values in _latencies(url, 1).items():
            with_wait[name] += values
    primary.stop(kill=True)
    replica.stop(kill=True)
    link.close()
    figures: dict[str, float] = {
        "lost_max": max(lost for lost, _ in losses),
        "lost_median": median([float(lost) for lost, _ in losses]),
        "lost_with_wait_max": max(lost for lost, _ in waited),
        "lost_behind_median": median([float(lost) for lost, _ in behind]),
        "lost_behind_with_wait_max": max(lost for lost, _ in behind_waited),
    }
    rows = []
    for name in ("submit", "claim"):
        p50 = median(with_wait[name]) / median(alone[name])
        p99 = percentile(with_wait[name], 0.99) / percentile(alone[name], 0.99)
        figures[f"{name}_p50_ratio"], figures[f"{name}_p99_ratio"] = p50, p99
        rows.append(
            f"| {name} | {median(alone[name]):.3f} / {percentile(alone[name], 0.99):.3f} | "
            f"{median(with_wait[name]):.3f} / {percentile(with_wait[name], 0.99):.3f} | "
            f"**{p50:.2f}** / {p99:.2f} |"
        )
    lost_list, waited_list, behind_list, behind_waited_list = (
        ", ".join(f"{lost} of {total:,}" for lost, total in runs)
        for runs in (losses, waited, behind, behind_waited)
    )
    write_section(
        "failover",
        f"""## Failover: what asynchronous replication loses, and what WAIT costs (`python -m bench failover`)

{machine()}. A primary and one replica (redis-servers on this machine; the replication link\nthrough a relay in the bench, which can hold it). Loss: four
clients increment counters as fast as they can; after 0.5 s the primary is SIGKILLed and the
replica promoted; a lost write is one the primary acknowledged that the replica lacks.
{KILLS} kills each way.

- Answered by the primary alone (Signoff's default): lost **{lost_list}** acknowledged writes
  (median {figures["lost_median"]:.0f}): the replication stream in flight when the primary died.
- Each write followed by `WAIT 1` on its connection (`SIGNOFF_REDIS_WAIT_REPLICAS=1`): lost
  **{waited_list}**.
- A replica {LAG_S:.1f} s behind when the primary dies (its link held that long: a slow or cut
  network), answered by the primary alone: lost **{behind_list}**, every write
  of those {LAG_S:.1f} s; with `WAIT 1`: lost **{behind_waited_list}** (the writes of that
  time were never acknowledged: they waited, then failed).

Cost of the wait, ms p50 / p99 per write ({BLOCKS} alternated blocks of {BLOCK}; the replica
on the same machine, so this is the floor: a replica across a network adds its round trip):

| write | primary alone | WAIT 1 | ratio p50 / p99 |
|---|---|---|---|
{chr(10).join(rows)}

A resolution is a script followed by WAIT, as a prompt's acceptance is: its cost follows
`submit`'s. Turns' other writes (history, events, checkpoints) are not waited for: what a
failover loses of them a leg redoes (`docs/architecture.md`, "Failover").
""",
    )
    return figures
