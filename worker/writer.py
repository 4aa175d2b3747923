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

from shared.errors import Conflict
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


class LeaseLost(Conflict):
    """Raised when another worker took over the conversation; this leg must stop writing."""


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
        self._settle: tuple[dict[str, Any], dict[str, str]] | None = None
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

    def write(self, flush: Flush) -> FlushResult:
        keys = list(self._script_keys)
        day = time.strftime("%Y-%m-%d", time.gmtime())
        keys[_DAY_USAGE_KEY] = self._keys.usage_by_day(day, self._shard)
        if flush.notification is not None:
            keys[_NOTIFICATION_KEY] = self._keys.notification(flush.notification.id)
        settle, apart = self._settle, {}
        if settle is not None and self._keys.shards > 1:
            # a cluster: the scopes outside the conversation's slot are settled after it
            apart = {scope: key for scope, key in settle[1].items() if scope in _SPEND_KEYS}
        elif settle is not None:
            for scope, key in settle[1].items():
                if scope in _SPEND_KEYS:
                    keys[_SPEND_KEYS[scope]] = key
        args = self._args(flush, in_slot=set(settle[0]["scopes"]) - set(apart) if settle else None)
        with storage_errors(f"writing turn {self.turn_id} of conversation {self.cid}"):
            reply = self._send(keys, args.model_dump_json(exclude_none=True), flush)
        self.round_trips += 1
        if reply[0] == "fenced":
            raise LeaseLost(f"lease of conversation {self.cid} was taken over; leg stopped")
        if settle is not None and apart:
            settle_apart(self.client, settle[0], apart.values())
        if settle is not None and settle is self._settle:
            self._settle = None
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

    def _args(self, flush: Flush, *, in_slot: set[str] | None = None) -> FlushArgs:
        """The script's argument; `in_slot`: the scopes of the settlement it writes (all)."""
        status = flush.conversation_status
        settle = None if self._settle is None else dict(self._settle[0])
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
