"""The runtime's only way to write: one fenced Lua script per flush.

A flush (`worker/flush.py`) checks the lease's fencing token, appends finished steps
with their usage to history, adds events to the stream and publishes them, and updates
the turn's checkpoint and the conversation's fields: one round trip, all or nothing.
It returns whether an abort was requested for the running turn, so checking for
cancellation costs nothing extra. The script (`worker/lua/flush.lua`) takes the flush
as one JSON argument, a `FlushArgs`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from pydantic import BaseModel
from redis.exceptions import NoScriptError

from shared.errors import StorageError
from shared.models.events import ConversationStatus, StatusEvent, TurnStatus
from shared.models.steps import Step
from shared.settings import Settings
from shared.store.budgets import settle_apart
from shared.store.connection import storage_errors
from shared.store.emit import EMIT_LUA, encode_event
from shared.store.history import HISTORY_SCRIPT_KEYS, HISTORY_WRITE_LUA, HistoryWrite
from shared.store.inbox_index import index_commands
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript
from shared.store.webhooks import OUTBOX_LUA, OUTBOX_MAXLEN
from worker.flush import Flush
from worker.lease import LeaseLost

__all__ = [
    "FAILURES_KEPT",
    "FLUSH_KEYS",
    "FailureEntry",
    "Flush",
    "FlushArgs",
    "LeaseLost",
    "StatusChange",
    "Writer",
]

# flush.lua's keys, the one place their order is written (the script reads them by name).
FLUSH_KEYS = (
    "lease",
    "conversation",
    "turn",
    "events",
    "tool_results",
    "notification",  # the turn's key when the flush files none
    "deliveries",  # the conversation's delivery stream
    *HISTORY_SCRIPT_KEYS,
    "inbox",
    "day_usage",  # set at each write: the day may change while a turn runs
    "all_deliveries",  # the global delivery stream
    "webhook_endpoints",
    "webhook_outbox",
    "failures",
    # a settled reservation's hashes (worker/budget.py), set by the flush that carries it;
    # the conversation's own is `conversation`
    "spend.batch",
    "spend.agent",
    "spend.owner",
)
_FLUSH = LuaScript(
    "worker",
    "flush.lua",
    keys=FLUSH_KEYS,
    args=["flush"],
    decode=["flush"],
    uses=[EMIT_LUA, HISTORY_WRITE_LUA, OUTBOX_LUA],
)
_NOTIFICATION_KEY = FLUSH_KEYS.index("notification")
_DAY_USAGE_KEY = FLUSH_KEYS.index("day_usage")
_SPEND_KEYS = {scope: FLUSH_KEYS.index(f"spend.{scope}") for scope in ("batch", "agent", "owner")}
FAILURES_KEPT = 1_000  # conversations in the failures index, the newest failures


class StatusChange(BaseModel):
    """A new status of the conversation, with its `status` event (encoded)."""

    status: ConversationStatus
    event: str


class FailureEntry(BaseModel):
    """A turn that ended failed: its conversation goes into the failures index."""

    conversation_id: str
    at: float
    kept: int  # the index keeps this many newest


class FlushArgs(BaseModel):
    """The flush script's one argument: what it writes, by Redis key.

    Hash fields are written as given (`Flush` chose them); events and the steps in
    `history` are already JSON, so the script stores exactly what pydantic wrote.
    """

    token: str  # the lease's fencing token ("" for a writer without a lease)
    turn_id: str
    maxlen: str  # of the event and delivery streams (MAXLEN ~)
    ttl_ms: str  # of the event stream, renewed with each event
    channels: list[str]  # the conversation's live channel and the global one
    turn: dict[str, str]
    conversation: dict[str, str]
    tool_results: dict[str, str]
    notification: dict[str, str]
    deliveries: list[list[str]]  # each a delivery's fields and values, in order
    webhooks: list[str] = []  # webhook events (JSON) for the outbox, kept if endpoints exist
    outbox_maxlen: int = OUTBOX_MAXLEN
    events: list[str]
    history: HistoryWrite
    status: StatusChange | None = None
    # A turn that ends leaves the conversation idle, unless close() came meanwhile: only
    # the script can see that, so it gets both changes, each event built and validated by
    # pydantic here, and picks one (patching the JSON in Lua would mean a second encoder).
    status_if_closed: StatusChange | None = None
    release_if_idle: bool = False  # a turn's end: let the lease go when nothing is queued
    usage_model: str = ""  # the day's usage (key `day_usage`) is counted under "<model>:<counter>"
    # the day's usage is also counted under "<scope>:<counter>": "@agent:<name>", "@owner:<name>"
    usage_scopes: list[str] = []
    settle: dict[str, Any] | None = None  # a model call's reservation, released and spent
    failed: FailureEntry | None = None


# A model call's settlement and the hashes it is written to (`Writer.settle`).
_Settle = tuple[dict[str, Any], dict[str, str]]


@dataclass(frozen=True)
class _Held:
    """A flush kept for the next round trip, and what to do if that round trip fails."""

    flush: Flush
    if_unwritten: Callable[[], None] | None


@dataclass(frozen=True)
class _Prepared:
    """A flush's script keys and argument, with the settlement it carries."""

    keys: list[str]
    args: str
    settle: _Settle | None
    apart: dict[str, str]  # on a cluster: the settlement's scopes outside the slot


@dataclass(frozen=True)
class FlushResult:
    first_position: int
    cancel_requested: bool
    event_ids: list[str]
    released: bool  # the turn ended with nothing queued, and the lease was let go


class Writer:
    """Writes flushes for one conversation's running turn under a fencing token."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        settings: Settings,
        cid: str,
        *,
        token: str,
        turn_id: str,
        max_history_size: int,
        model: str,
        usage_scopes: tuple[str, ...] = (),
    ) -> None:
        self.client = client
        self.settings = settings
        self.cid = cid
        self.token = token
        self.turn_id = turn_id
        self.max_history_size = max_history_size
        self.model = model
        self.usage_scopes = list(usage_scopes)
        self._settle: _Settle | None = None
        self._held: _Held | None = None  # a flush that goes out with the next round trip
        self._keys = keys
        self.cancel_seen = False  # an abort of this turn was reported by a flush
        self.released = False  # the turn's end let the lease go: nothing was queued
        self.on_flush: Callable[[Flush], None] | None = None  # called after each written flush
        self.written: list[Step] = []  # steps this writer appended, in order
        self.failures_kept = FAILURES_KEPT
        self._shard = keys.shard_of(cid)
        unset = "" if keys.shards == 1 else keys.conversation(cid)
        turn_key = keys.turn(cid, turn_id)
        named = {
            "lease": keys.lease(cid),
            "conversation": keys.conversation(cid),
            "turn": turn_key,
            "events": keys.events(cid),
            "tool_results": keys.tool_results(cid),
            "notification": turn_key,
            "deliveries": keys.conversation_notifications(cid),
            **{f"history.{name}": key for name, key in keys.history_by_name(cid).items()},
            "inbox": keys.inbox(cid),
            "day_usage": "",
            "all_deliveries": keys.notification_stream(self._shard),
            "webhook_endpoints": keys.webhook_endpoints_copy(self._shard),
            "webhook_outbox": keys.webhook_outbox(self._shard),
            "failures": keys.failures(self._shard),
            # unset: "" on one Redis; a key of the conversation's slot (unread) on a cluster
            **{f"spend.{scope}": unset for scope in _SPEND_KEYS},
        }
        self._script_keys = _FLUSH.keys_from(named)
        self._maxlen = str(settings.stream_maxlen)
        self._ttl_ms = str(settings.events_ttl_s * 1000)
        self.live_channel = keys.live(cid)
        self._channels = [self.live_channel, keys.live_all()]
        self.round_trips = 0
        self.next_position = 0  # absolute history position of the next step; set by the leg
        self._doing = f"writing turn {turn_id} of conversation {cid}"

    def write(self, flush: Flush) -> FlushResult:
        """Writes `flush` (after the held one, in the same round trip); raises LeaseLost."""
        held = self._take_held()
        if held is not None and flush.notification is None:
            prepared = self._prepare(flush, None)
            reply = self._carried(held, _FLUSH, prepared.keys, [prepared.args])
            return self._finish(flush, prepared, reply)
        if held is not None:
            self._send_alone(held)
        prepared = self._prepare(flush, self._settle)
        with storage_errors(self._doing):
            reply = self._send(prepared.keys, prepared.args, flush)
        return self._finish(flush, prepared, reply)

    def hold(self, flush: Flush, *, if_unwritten: Callable[[], None] | None = None) -> None:
        """Keeps `flush` to go out with this writer's next round trip: the next flush, or the
        reservation of the model call that follows it (`carrying`), one round trip a call
        fewer. For a flush whose reply nothing waits on (a turn's start, a tool's result
        before the next call). Its steps count as written at once, so the context built
        before it goes out has them; `if_unwritten` runs when the round trip that carried it
        failed (a tool's outcome is then settled under its claim)."""
        held = self._take_held()
        if held is not None:
            self._send_alone(held)
        self._held = _Held(flush, if_unwritten)
        self.next_position += len(flush.steps)
        self.written += flush.steps

    @property
    def unsent_steps(self) -> int:
        """How many of `written` are in a held flush, not yet in Redis."""
        return 0 if self._held is None else len(self._held.flush.steps)

    def send_held(self) -> None:
        """Sends the held flush now, if any (a leg that ends writes nothing after it)."""
        held = self._take_held()
        if held is not None:
            self._send_alone(held)

    def carrying(self, script: LuaScript, keys: list[str], args: list[Any]) -> Any:
        """`script`'s reply, run after the held flush (if any) in the same round trip. The
        script must check the lease itself: a fenced flush does not stop it."""
        held = self._take_held()
        if held is None:
            return script(self.client, keys, args)
        return self._carried(held, script, keys, args)

    def _take_held(self) -> _Held | None:
        held, self._held = self._held, None
        return held

    def _send_alone(self, held: _Held) -> None:
        prepared = self._prepare(held.flush, self._settle)
        try:
            with storage_errors(self._doing):
                reply = _FLUSH(self.client, prepared.keys, [prepared.args])
        except StorageError:
            if held.if_unwritten is not None:
                held.if_unwritten()
            raise
        self._finish(held.flush, prepared, reply, held=True)

    def _carried(self, held: _Held, script: LuaScript, keys: list[str], args: list[Any]) -> Any:
        """The held flush, then `script`, in one pipeline, each by its digest; a script Redis
        no longer has (a restart) is run again alone, in order: each checks the lease."""
        prepared = self._prepare(held.flush, self._settle)
        try:
            with storage_errors(self._doing):
                started = time.perf_counter()
                with self.client.pipeline(transaction=False) as pipe:
                    _FLUSH.queue_by_digest(pipe, prepared.keys, [prepared.args])
                    script.queue_by_digest(pipe, keys, args)
                    first, second = pipe.execute(raise_on_error=False)
                for ran in (_FLUSH, script):
                    ran.observe(time.perf_counter() - started)
                if isinstance(first, NoScriptError):
                    first = _FLUSH(self.client, prepared.keys, [prepared.args])
                elif isinstance(first, Exception):
                    raise first
        except StorageError:
            if held.if_unwritten is not None:
                held.if_unwritten()
            raise
        self._finish(held.flush, prepared, first, held=True)
        with storage_errors(self._doing):
            if isinstance(second, NoScriptError):
                return script(self.client, keys, args)
            if isinstance(second, Exception):
                raise second
        return second

    def _prepare(self, flush: Flush, settle: _Settle | None) -> _Prepared:
        """The flush's keys and argument, carrying `settle` (the pending settlement)."""
        keys = list(self._script_keys)
        day = time.strftime("%Y-%m-%d", time.gmtime())
        keys[_DAY_USAGE_KEY] = self._keys.usage_by_day(day, self._shard)
        if flush.notification is not None:
            keys[_NOTIFICATION_KEY] = self._keys.notification(flush.notification.id)
        apart: dict[str, str] = {}
        if settle is not None and self._keys.shards > 1:
            # a cluster: the scopes outside the conversation's slot are settled after it
            apart = {scope: key for scope, key in settle[1].items() if scope in _SPEND_KEYS}
        elif settle is not None:
            for scope, key in settle[1].items():
                if scope in _SPEND_KEYS:
                    keys[_SPEND_KEYS[scope]] = key
        in_slot = set(settle[0]["scopes"]) - set(apart) if settle else None
        args = self._args(flush, settle, in_slot=in_slot)
        return _Prepared(keys, args.model_dump_json(exclude_none=True), settle, apart)

    def _finish(
        self, flush: Flush, prepared: _Prepared, reply: Any, *, held: bool = False
    ) -> FlushResult:
        """Takes in a flush's reply; a held flush's steps were counted when it was held."""
        self.round_trips += 1
        if reply[0] == "fenced":
            raise LeaseLost(f"lease of conversation {self.cid} was taken over; leg stopped")
        settle = prepared.settle
        if settle is not None and prepared.apart:
            settle_apart(self.client, settle[0], prepared.apart.values())
        if settle is not None and settle is self._settle:
            self._settle = None
        if not held:
            self.next_position = int(reply[1]) + len(flush.steps)
            self.written += flush.steps
        result = FlushResult(int(reply[1]), reply[2] == 1, list(reply[3]), reply[4] == 1)
        self.released = self.released or result.released
        self.cancel_seen = self.cancel_seen or result.cancel_requested
        self.announce(flush)
        return result

    def settle(self, settlement: dict[str, Any], spend_keys: dict[str, str]) -> None:
        """The next flush settles a model call's reservation (worker/budget.py). Calls made
        before one flush (a compaction's pieces) settle together when they share their
        budgets' keys; otherwise a flush settles the earlier ones first."""
        pending = self._settle
        if pending is not None:
            earlier, keys = pending
            if keys == spend_keys and earlier["scopes"] == settlement["scopes"]:
                settlement = {
                    k: v if k == "scopes" else earlier[k] + v for k, v in settlement.items()
                }
            else:
                self.write(Flush())
        self._settle = (settlement, spend_keys)

    def announce(self, flush: Flush) -> None:
        """Tells `on_flush` of changes a script other than the flush wrote (the claim's)."""
        if self.on_flush is not None:
            self.on_flush(flush)

    def _args(
        self, flush: Flush, carried: _Settle | None, *, in_slot: set[str] | None = None
    ) -> FlushArgs:
        """The script's argument; `in_slot`: the scopes of the settlement it writes (all)."""
        status = flush.conversation_status
        settle = None if carried is None else dict(carried[0])
        if settle is not None and in_slot is not None:
            settle["scopes"] = [scope for scope in settle["scopes"] if scope in in_slot]
        return FlushArgs(
            token=self.token,
            turn_id=self.turn_id,
            maxlen=self._maxlen,
            ttl_ms=self._ttl_ms,
            channels=self._channels,
            turn=flush.turn_fields(),
            conversation=flush.conversation_fields(),
            tool_results=flush.tool_result_fields(),
            notification=flush.notification_fields(),
            deliveries=[_flat(entry.fields()) for entry in flush.deliveries],
            webhooks=[event.model_dump_json() for event in flush.webhooks],
            events=[encode_event(event) for event in flush.events],
            history=HistoryWrite.of(
                flush.steps, self.max_history_size, usage=flush.usage, start_turn=flush.start_turn
            ),
            status=None if status is None else self._status_change(status),
            release_if_idle=flush.end is not None,
            usage_model=self.model,
            usage_scopes=self.usage_scopes,
            settle=settle,
            failed=self._failure(flush),
            status_if_closed=(
                self._status_change(ConversationStatus.CLOSED)
                if status is ConversationStatus.IDLE
                else None
            ),
        )

    def _failure(self, flush: Flush) -> FailureEntry | None:
        if flush.end is None or flush.turn_status is not TurnStatus.FAILED:
            return None
        return FailureEntry(
            conversation_id=self.cid, at=flush.end.finished_at, kept=self.failures_kept
        )

    def _status_change(self, status: ConversationStatus) -> StatusChange:
        event = StatusEvent(conversation_id=self.cid, turn_id=self.turn_id, status=status)
        return StatusChange(status=status, event=encode_event(event))

    def _send(self, keys: list[str], args: str, flush: Flush) -> Any:
        if flush.notification is None:
            return _FLUSH(self.client, keys, [args])
        # A park: its notification's inbox indexes are global keys of their own, written
        # right after the script in one pipeline (the sweeper repairs them after a Redis
        # failure between the two). The script's body goes too, never its digest alone, so
        # that after a Redis restart no index entry precedes its notification.
        with self.client.pipeline(transaction=False) as pipe:
            _FLUSH(pipe, keys, [args])
            for key, members in index_commands(self._keys, flush.notification):
                pipe.zadd(key, members)
            # where the archive finds the notification's hash (shared/archive/)
            pipe.sadd(self._keys.notification_ids(self.cid), flush.notification.id)
            replies = pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies[0]


def _flat(fields: dict[str, str]) -> list[str]:
    return [item for pair in fields.items() for item in pair]
