"""The outcomes of a conversation's tool calls, by call id: each call runs at most once.

Before a tool runs, its call id is claimed (`HSETNX`, state `started`, in a script that checks
the leg's lease and carries the flush its writer holds); its outcome
is recorded under the id by the flush that writes its result step
(`Flush.tool_results`). A call that stopped to ask a person (`InputNeeded`) is held
(state `input`, with its state) and claimed again, once, when it resumes. A claimed
id is never run again: a redelivered leg reuses the
recorded outcome, and a call claimed without one (the worker died while it ran) is
reported to the model instead.

A claim names the leg that made it (its lease token). A leg that loses its Redis connection
settles its own claims when Redis answers again (`settle`, compare-and-set on that record):
a claim whose tool never ran is withdrawn, so the next leg runs it; a tool that ran but whose
result's flush was lost has its outcome recorded, so the next leg reuses it. Either way no
call runs twice, and fewer read "effect unknown".
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Protocol

import redis

from shared.errors import CorruptRecord, StorageError
from shared.models.steps import ToolCall
from shared.store.connection import ReplicaWait, connection_lost, storage_errors
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript
from worker.lease import LeaseLost
from worker.tools import ToolOutcome

__all__ = ["Carrier", "ToolLedger", "outcome_record"]

log = logging.getLogger(__name__)

_STARTED = json.dumps({"state": "started"})
_CLAIM = LuaScript(
    "worker", "tool_claim.lua", keys=["tool_results", "lease"], args=["call_id", "record", "token"]
)
_SETTLE = LuaScript(
    "worker", "tool_settle.lua", keys=["tool_results"], args=["call_id", "claimed", "outcome"]
)
# How long a leg that lost its connection keeps trying to settle its claims: a Sentinel
# failover takes seconds.
SETTLE_TRIES_S = (0.1, 0.3, 1.0, 2.0, 4.0)


class Carrier(Protocol):
    """The leg's writer, which may hold a flush that must reach Redis before a tool runs."""

    token: str

    def carrying(self, script: LuaScript, keys: list[str], args: list[Any]) -> Any: ...

    def send_held(self) -> None: ...


def outcome_record(outcome: ToolOutcome) -> str:
    """An outcome as it is recorded under its call id."""
    return json.dumps(
        {"state": "done", "ok": outcome.ok, "result": outcome.result, "error": outcome.error},
        default=str,
    )


class ToolLedger:
    """The tool results hash of one conversation."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        cid: str,
        wait: ReplicaWait | None = None,
        *,
        by: str = "",
        carrier: Carrier | None = None,
    ) -> None:
        self.client = client
        self.cid = cid
        self._key = keys.tool_results(cid)
        self._lease = keys.lease(cid)
        # a leg's claims go out with the flush its writer holds, fenced by its lease
        self._carrier = carrier
        self._wait = wait  # replicas that must have a claim before its tool runs
        self._started = json.dumps({"state": "started", "by": by}) if by else _STARTED

    def claim(self, call_id: str) -> bool:
        """Marks the call started; False when an earlier leg claimed it already. With a
        replica wait, the claim is on the replicas before the tool runs: a failover cannot
        forget it and run the tool again. A claim that fails (the connection, the replicas)
        is withdrawn before this raises, where Redis lets it: its tool has not run."""
        what = f"claiming tool call {call_id} of conversation {self.cid}"
        try:
            claimed, acknowledged = self._claim(call_id, what)
            if self._wait is not None:
                self._wait.check(acknowledged, what)
        except StorageError:
            self.settle(call_id, None)
            raise
        return claimed

    def _claim(self, call_id: str, what: str) -> tuple[bool, Any]:
        carrier = self._carrier
        if carrier is not None and self._wait is not None:
            carrier.send_held()  # the replicas' wait below counts one connection's writes
        with storage_errors(what):
            if self._wait is None and carrier is not None:
                keys, args = [self._key, self._lease], [call_id, self._started, carrier.token]
                claimed = carrier.carrying(_CLAIM, keys, args)
                if claimed == "fenced":
                    raise LeaseLost(f"lease of conversation {self.cid} was taken over; leg stopped")
                return bool(claimed), None
            if self._wait is None:
                return bool(self.client.hsetnx(self._key, call_id, self._started)), None
            # one connection for the claim and its WAITs: WAIT counts its connection's writes
            pinned = redis.Redis(
                connection_pool=self.client.connection_pool, single_connection_client=True
            )
            try:
                claimed = pinned.hsetnx(self._key, call_id, self._started)
                return bool(claimed), self._wait.patiently(pinned)
            finally:
                pinned.close()

    def settle(self, call_id: str, outcome: ToolOutcome | None) -> bool:
        """After a lost connection: records `outcome` under this leg's own claim, or withdraws
        the claim when the tool never ran (None), trying for a few seconds; True if settled.
        A claim another leg holds or settled since is left alone."""
        replacement = "" if outcome is None else outcome_record(outcome)
        args = [call_id, self._started, replacement]
        for pause in (0.0, *SETTLE_TRIES_S):
            time.sleep(pause)
            try:
                with storage_errors(f"settling tool call {call_id} of conversation {self.cid}"):
                    return bool(_SETTLE(self.client, [self._key], args))
            except StorageError as exc:
                last = exc
                if not connection_lost(exc):  # a refusal: trying again changes nothing
                    break
        log.warning("tool call %s of %s stays unsettled: %s", call_id, self.cid, last)
        return False

    def hold_for_input(self, call_id: str, state: str) -> None:
        """The claimed call stopped to ask a person (InputNeeded): it may run again, once."""
        record = json.dumps({"state": "input", "resume": state})
        with storage_errors(f"holding tool call {call_id} of conversation {self.cid}"):
            self.client.hset(self._key, call_id, record)

    def resume(self, call_id: str) -> str | None:
        """Claims a call held for input again; its state, or None when it is not held."""
        with (
            storage_errors(f"resuming tool call {call_id} of conversation {self.cid}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            while True:
                try:
                    pipe.watch(self._key)
                    raw = pipe.hget(self._key, call_id)
                    record = _parsed(self._key, call_id, raw)
                    if record.get("state") != "input":
                        return None
                    pipe.multi()
                    pipe.hset(self._key, call_id, _STARTED)
                    pipe.execute()
                    return str(record.get("resume", ""))
                except redis.WatchError:
                    continue

    def recorded(self, call: ToolCall) -> ToolOutcome:
        """The outcome recorded under a claimed call id, or why there is none."""
        with storage_errors(f"reading tool call {call.id} of conversation {self.cid}"):
            raw = self.client.hget(self._key, call.id)
        record = _parsed(self._key, call.id, raw) if raw else {"state": "started"}
        if record.get("state") in ("started", "input"):
            return ToolOutcome(
                ok=False,
                result=None,
                error=(
                    f"the worker stopped while {call.name} was running; it was not run again "
                    "and its effect is unknown"
                ),
            )
        return ToolOutcome(
            ok=bool(record["ok"]), result=record.get("result"), error=str(record.get("error", ""))
        )


def _parsed(key: str, call_id: str, raw: object) -> dict[str, Any]:
    try:
        found = json.loads(str(raw)) if raw else {}
    except ValueError as exc:
        raise CorruptRecord(f"tool call {call_id} in {key} is not JSON") from exc
    return found if isinstance(found, dict) else {}
