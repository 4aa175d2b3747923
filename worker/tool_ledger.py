"""The outcomes of a conversation's tool calls, by call id: each call runs at most once.

Before a tool runs, its call id is claimed (`HSETNX`, state `started`); its outcome
is recorded under the id by the flush that writes its result step
(`Flush.tool_results`). A call that stopped to ask a person (`InputNeeded`) is held
(state `input`, with its state) and claimed again, once, when it resumes. A claimed
id is never run again: a redelivered leg reuses the
recorded outcome, and a call claimed without one (the worker died while it ran) is
reported to the model instead.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from shared.errors import CorruptRecord
from shared.models.steps import ToolCall
from shared.store.connection import ReplicaWait, storage_errors
from shared.store.keys import KeySpace
from worker.tools import ToolOutcome

__all__ = ["ToolLedger", "outcome_record"]

_STARTED = json.dumps({"state": "started"})


def outcome_record(outcome: ToolOutcome) -> str:
    """An outcome as it is recorded under its call id."""
    return json.dumps(
        {"state": "done", "ok": outcome.ok, "result": outcome.result, "error": outcome.error},
        default=str,
    )


class ToolLedger:
    """The tool results hash of one conversation."""

    def __init__(
        self, client: redis.Redis, keys: KeySpace, cid: str, wait: ReplicaWait | None = None
    ) -> None:
        self.client = client
        self.cid = cid
        self._key = keys.tool_results(cid)
        self._wait = wait  # replicas that must have a claim before its tool runs

    def claim(self, call_id: str) -> bool:
        """Marks the call started; False when an earlier leg claimed it already. With a
        replica wait, the claim is on the replicas before the tool runs: a failover cannot
        forget it and run the tool again."""
        what = f"claiming tool call {call_id} of conversation {self.cid}"
        with storage_errors(what):
            if self._wait is None:
                return bool(self.client.hsetnx(self._key, call_id, _STARTED))
            # one connection for the claim and its WAITs: WAIT counts its connection's writes
            pinned = redis.Redis(
                connection_pool=self.client.connection_pool, single_connection_client=True
            )
            try:
                claimed = pinned.hsetnx(self._key, call_id, _STARTED)
                acknowledged = self._wait.patiently(pinned)
            finally:
                pinned.close()
        # a claim short of its replicas fails the leg before the tool runs; a failover may
        # keep it, and the call then reads as stopped with its effect unknown (never run twice)
        self._wait.check(acknowledged, what)
        return bool(claimed)

    def hold_for_input(self, call_id: str, state: str) -> None:
        """The claimed call stopped to ask a person (InputNeeded): it may run again, once."""
        record = json.dumps({"state": "input", "resume": state})
        with storage_errors(f"holding tool call {call_id} of conversation {self.cid}"):
            self.client.hset(self._key, call_id, record)

    def resume(self, call_id: str) -> str | None:
        """Claims a call held for input again; its state, or None when it is not held."""
        with (
            storage_errors(f"resuming tool call {call_id} of conversation {self.cid}"),
            self.client.pipeline() as pipe,
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
