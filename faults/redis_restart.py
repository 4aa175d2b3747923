"""Redis SIGKILLed and restarted (same port, same AOF) in the middle of a batch with approvals.

A batch through `BatchStore`, every `ask_every`-th prompt calling `record_effect` under an
`ask` policy, so parks, resolutions and batch transitions are in flight when Redis dies.
An operator loop resolves what the inbox shows (Allow), as a person would; workers and the
beat that die with their broker are started again, as a supervisor would. The batch must
finish with every item terminal and no approval left where no operator sees it.

Redis runs with `appendfsync always`, so a process kill loses nothing acknowledged (with
`everysec` it would not either: the kernel still holds the writes; a host crash would lose
the last second, see docs/reliability.md).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from faults.checks import Turns, audit
from faults.harness import Stack, stack
from faults.report import Result
from shared.client import Client
from shared.errors import Conflict, NotFound, SignoffError
from shared.models.batches import BatchConfig, BatchStatus
from shared.models.config import ConversationConfig
from shared.models.content import Content
from shared.models.notifications import Allow
from shared.models.steps import UsageMetadata
from shared.store.batches import BatchInfo, BatchLine, BatchStore
from shared.store.history import HistoryStore

__all__ = ["FULL", "QUICK", "Size", "run"]


@dataclass(frozen=True)
class Size:
    items: int
    redis_kills: int
    ask_every: int = 3
    workers: int = 2
    concurrency: int = 4
    max_concurrency: int = 12
    token_delay_ms: int = 20
    down_s: tuple[float, float] = (0.3, 1.5)  # how long Redis stays dead
    timeout_s: float = 240.0


AUDIT_WAIT_S = 30.0

QUICK = Size(items=40, redis_kills=2)
FULL = Size(items=200, redis_kills=6)


@dataclass
class Drive:
    """What the main loop did: Redis kills, processes started again, the last batch info."""

    kills: int = 0
    revived: list[str] = field(default_factory=list)
    info: BatchInfo | None = None


class Operator(threading.Thread):
    """Allows every approval of the batch the inbox shows, as a person would, all along.

    It runs beside the Redis kills, so some resolutions are cut between their
    compare-and-set and their clean-up.
    """

    def __init__(self, stack: Stack, bid: str) -> None:
        super().__init__(name="operator", daemon=True)
        self.stack = stack
        self.bid = bid
        self.stopping = threading.Event()
        self.resolved = 0
        self.errors = 0  # calls that failed because Redis was away

    def run(self) -> None:
        with self.stack.client() as client:
            while not self.stopping.wait(0.05):
                try:
                    self._resolve_page(client)
                except SignoffError:
                    self.errors += 1

    def _resolve_page(self, client: Client) -> None:
        for nid in client.notifications.pending_ids(batch_id=self.bid, limit=1000):
            try:
                client.resolve_notification(nid, Allow(), actor="faults-operator")
                self.resolved += 1
            except (Conflict, NotFound):
                continue

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


def prompt(index: int, ask_every: int) -> str:
    if index % ask_every == 0:
        return f'call record_effect {{"note": "batch-{index}"}}'
    return f"item {index}: say something"


def run(size: Size, workdir: Path, rng: random.Random) -> Result:
    result = Result("Redis SIGKILL mid-batch", f"{size.items} items, {size.redis_kills} kills")
    env = {
        "SIGNOFF_SWEEP_INTERVAL_S": "0.5",
        "SIGNOFF_SCRIPTED_TOKEN_DELAY_MS": str(size.token_delay_ms),
    }
    with stack("redis-restart", workdir, **env) as built, built.client() as client:
        for i in range(size.workers):
            built.worker(f"rr{i}", concurrency=size.concurrency)
        built.beat()
        for service in built.services:
            service.wait_ready()
        store = BatchStore(client.redis, client.keys, client.settings, client.tasks)
        bid = _submit(store, client, size)
        operator = Operator(built, bid)
        operator.start()
        try:
            drive = _drive(built, store, bid, size, rng)
        finally:
            operator.stop()
        result.kills = drive.kills
        _judge(result, drive, size)
        turns = _item_turns(client, bid)
        result.absorb(audit(client, turns, built.effects))
        result.usage_twice += _batch_usage_mismatch(client, drive.info, turns, result)
        _check_audit(client, turns, result)
        repairs = built.sweep_counts()
        mended = ", ".join(f"{repairs[w]} {w}" for w in ("restored", "redelivered", "dropped"))
        result.notes.append(
            f"{operator.resolved} approvals resolved through the inbox; the reconciler's "
            f"repairs: {mended}, {repairs['reaudited']} reaudited"
        )
        if drive.revived:
            result.notes.append(
                f"processes that exited on their own, started again by the suite: "
                f"{', '.join(drive.revived)}"
            )
        if operator.errors:
            result.notes.append(f"{operator.errors} operator calls failed while Redis was away")
    return result


def _submit(store: BatchStore, client: Client, size: Size) -> str:
    conversation = ConversationConfig.from_settings(
        client.settings, tools={"record_effect": "ask"}, policy_may_loosen=True
    )
    bid = store.create(BatchConfig(conversation=conversation, max_concurrency=size.max_concurrency))
    lines = [
        BatchLine(i + 1, f"item-{i}", Content.from_text(prompt(i, size.ask_every)))
        for i in range(size.items)
    ]
    store.submit(bid, lines)
    store.finish_submission(bid)
    return bid


def _drive(built: Stack, store: BatchStore, bid: str, size: Size, rng: random.Random) -> Drive:
    """Waits for the batch to finish, killing Redis as it passes each mark."""
    marks = [size.items * (j + 1) // (size.redis_kills + 1) for j in range(size.redis_kills)]
    drive = Drive()
    deadline = time.monotonic() + size.timeout_s
    while time.monotonic() < deadline:
        info = _info(store, bid)
        drive.info = info or drive.info
        if info is not None and info.status is BatchStatus.DONE:
            break
        if info is not None and marks and info.finished >= marks[0]:
            marks.pop(0)
            built.redis.stop(kill=True)
            time.sleep(rng.uniform(*size.down_s))
            built.redis.start()
            drive.kills += 1
        drive.revived += built.revive()
        time.sleep(0.1)
    return drive


def _info(store: BatchStore, bid: str) -> BatchInfo | None:
    try:
        return store.info(bid)
    except SignoffError:
        return None


def _judge(result: Result, drive: Drive, size: Size) -> None:
    info = drive.info
    if drive.kills < size.redis_kills:
        result.fail(f"only {drive.kills} of {size.redis_kills} Redis kills made")
    if info is None or info.status is not BatchStatus.DONE or info.finished != info.total:
        counts = {s.value: n for s, n in info.counts.items() if n} if info else {}
        result.fail(f"the batch did not finish in {size.timeout_s:.0f} s: {counts}")


def _item_turns(client: Client, bid: str) -> Turns:
    items = [json.loads(raw) for raw in client.redis.lrange(client.keys.batch_items(bid), 0, -1)]
    return {item["conversation_id"]: [item["turn_id"]] for item in items if item["turn_id"]}


def _batch_usage_mismatch(
    client: Client, info: BatchInfo | None, turns: Turns, result: Result
) -> int:
    """1 when the batch's usage total is not the sum of its conversations' totals."""
    total = UsageMetadata()
    for cid in turns:
        total = total + HistoryStore(client.redis, client.keys, cid).snapshot().cumulative_usage
    if info is None or info.usage == total:
        return 0
    result.fail(f"batch usage {info.usage} is not its conversations' sum {total}")
    return 1


def _check_audit(client: Client, turns: Turns, result: Result) -> None:
    """Each settled approval of the batch has one audit entry, once the inbox is clean.

    A resolution cut between its compare-and-set and its clean-up leaves its inbox entry,
    and the reconciler writes a lost audit entry again 10 s later: wait for that first.
    """
    ids = [
        str(nid)
        for nid in client.redis.zrange(client.keys.notifications_all(), 0, -1)
        if str(nid).rpartition(".")[0] in turns
    ]
    deadline = time.monotonic() + AUDIT_WAIT_S
    while _still_pending(client, ids) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _still_pending(client, ids)
    if left:
        result.fail(f"{left} settled approval(s) still in the inbox after {AUDIT_WAIT_S:.0f} s")
    audited = Counter(
        entry["notification_id"] for entry in client.notifications.audit(count=100 * len(ids) + 100)
    )
    wrong = {nid: audited[nid] for nid in ids if audited[nid] != 1}
    if wrong:
        result.fail(f"approvals audited other than once: {wrong}")


def _still_pending(client: Client, ids: list[str]) -> int:
    with client.redis.pipeline(transaction=False) as pipe:
        for nid in ids:
            pipe.zscore(client.keys.notifications_pending(), nid)
        return sum(1 for score in pipe.execute() if score is not None)
