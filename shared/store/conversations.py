"""Conversation records: creation, the inbox of turns, abort and close.

Every state change is one Lua script on the conversation's hash-tagged keys, and
any event it causes is emitted by the same script, so a reader never sees a state
without its event or an event without its state.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from pydantic import ValidationError

from shared.client.task_message import QueuedTask
from shared.errors import Conflict, ConversationClosed, CorruptRecord, NotFound
from shared.models.config import ConversationConfig, PromptOptions
from shared.models.content import Content
from shared.models.events import ChatResponse, ConversationStatus, StatusEvent, TurnStatus
from shared.settings import DoubleTextPolicy, Settings
from shared.store.connection import ReplicaWait, storage_errors
from shared.store.emit import EMIT_LUA, encode_event
from shared.store.keys import KeySpace, check_id
from shared.store.lua import LuaScript, lua_source
from shared.store.sharded import zset_page, zset_total

__all__ = [
    "HELD_FIELD",
    "ConversationRecord",
    "ConversationStore",
    "OnCorrupt",
    "Submission",
    "TurnRecord",
    "allow_field",
    "new_id",
]

# Told about each record a listing leaves out because it does not parse.
OnCorrupt = Callable[[CorruptRecord], None]

# Queued turns are ended by these scripts, not by a worker: they never started.
_CANCEL_QUEUED_LUA = lua_source("shared.store", "cancel_queued.lua")
_EMIT_ARGS = ("maxlen", "ttl_ms", "channel", "channel_all")  # `_emit_args`, in order

_SUBMIT = LuaScript(
    "shared.store",
    "conversation_submit.lua",
    keys=["conversation", "inbox", "turn", "events", "turn_ids"],
    args=[
        "cid",
        "turn_id",
        "prompt",
        "policy",
        "now",
        *_EMIT_ARGS,
        "owner",
        "options",
        "title",
        "queue",
        "advance",
    ],
    uses=[EMIT_LUA, _CANCEL_QUEUED_LUA],
)
_ABORT = LuaScript(
    "shared.store",
    "conversation_abort.lua",
    keys=["conversation", "inbox", "events"],
    args=["cid", "now", *_EMIT_ARGS, "close", "closed_event"],
    uses=[EMIT_LUA, _CANCEL_QUEUED_LUA],
)


# A field of the conversation's hash: '1' while no worker may start its turns (a batch
# item not yet dispatched); the claim script refuses a held conversation.
HELD_FIELD = "held"


def allow_field(tool: str) -> str:
    """A field of a conversation's (or a batch's) hash: '1' once an operator allowed `tool`
    for the rest of it (a sticky allow)."""
    return f"allow:{tool}"


_CREATE = LuaScript(
    "shared.store",
    "conversation_create.lua",
    keys=["conversation"],
    args=["config", "now", "policy", "owner", "held"],
)


_STATUS_SCAN_CHUNK = 500


def new_id() -> str:
    """A short random id, safe in keys and URLs."""
    return uuid.uuid4().hex[:20]


@dataclass(frozen=True)
class Submission:
    turn_id: str
    after_event_id: str
    replayed: bool = False  # its turn id was taken by this same prompt already: nothing queued


@dataclass(frozen=True)
class ConversationRecord:
    conversation_id: str
    config: ConversationConfig
    status: ConversationStatus
    closed: bool
    active_turn: str
    created_at: float
    updated_at: float
    queued: int
    owner: str = ""  # who created it: a user or token name, "batch:<id>", or "" (a direct client)
    title: str = ""  # the first line of its first prompt
    last_turn_status: TurnStatus | None = None  # how its last ended turn ended

    @property
    def failed(self) -> bool:
        """Its last turn failed and nothing runs since: what lists show as `failed`."""
        return (
            self.last_turn_status is TurnStatus.FAILED
            and self.status is ConversationStatus.IDLE
            and not self.active_turn
        )


@dataclass(frozen=True)
class TurnRecord:
    conversation_id: str
    turn_id: str
    prompt: Content
    status: TurnStatus
    created_at: float
    fields: dict[str, str]
    options: PromptOptions = field(default_factory=PromptOptions)

    def response(self) -> ChatResponse | None:
        """The turn's ChatResponse once it completed; None before (or when it did not)."""
        raw = self.fields.get("response")
        if self.status is not TurnStatus.COMPLETED or not raw:
            return None
        try:
            return ChatResponse.model_validate_json(raw)
        except ValidationError as exc:
            raise CorruptRecord(f"response of turn {self.turn_id} does not parse") from exc


class ConversationStore:
    """Creates conversations and changes their state, one script per change."""

    def __init__(self, client: redis.Redis, keys: KeySpace, settings: Settings) -> None:
        self.client = client
        self.keys = keys
        self.settings = settings

    def create(
        self, config: ConversationConfig, *, conversation_id: str | None = None, owner: str = ""
    ) -> str:
        cid = check_id(conversation_id or new_id(), "conversation id")
        with (
            storage_errors("creating a conversation"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            self.queue_create(pipe, cid, config, owner=owner)
            created, _ = pipe.execute()
        if not created:
            raise Conflict(f"conversation {cid} already exists")
        return cid

    def queue_create(
        self,
        pipe: Any,
        cid: str,
        config: ConversationConfig,
        *,
        owner: str = "",
        held: bool = False,
    ) -> None:
        """Queues the creation (a no-op returning 0 when the id is taken) and its index entry.

        A `held` conversation takes prompts, but no worker starts them until `queue_release`.
        """
        now = time.time()
        args = {
            "config": config.model_dump_json(),
            "now": now,
            "policy": config.double_text_policy.value,
            "owner": owner,
            "held": "1" if held else "",
        }
        _CREATE.queue(pipe, [self.keys.conversation(cid)], _CREATE.args_from(args))
        pipe.zadd(self.keys.conversations(self.keys.shard_of(cid)), {cid: now}, nx=True)

    def queue_release(self, pipe: Any, cid: str, *, index: bool = True) -> None:
        """Queues the end of a hold: its turns may start, and (`index`) the sweeper watches it."""
        pipe.hdel(self.keys.conversation(cid), HELD_FIELD)
        if index:
            pipe.zadd(self.keys.active(self.keys.shard_of(cid)), {cid: time.time()})

    def get(self, cid: str) -> ConversationRecord:
        with (
            storage_errors(f"reading conversation {cid}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            self.queue_get(pipe, cid)
            return self.parse_get(cid, pipe.execute())

    def queue_get(self, pipe: Any, cid: str) -> None:
        pipe.hgetall(self.keys.conversation(cid))
        pipe.llen(self.keys.inbox(cid))

    def parse_get(self, cid: str, results: list[Any]) -> ConversationRecord:
        raw, queued = results
        if not raw:
            raise NotFound(f"conversation {cid} does not exist")
        config = self._config(cid, raw)
        try:
            return ConversationRecord(
                conversation_id=cid,
                config=config,
                status=ConversationStatus(raw.get("status", "idle")),
                closed=raw.get("closed") == "1",
                active_turn=raw.get("active_turn", ""),
                created_at=float(raw.get("created_at", 0)),
                updated_at=float(raw.get("updated_at", 0)),
                queued=int(queued),
                owner=raw.get("owner", ""),
                title=raw.get("title", ""),
                last_turn_status=TurnStatus(raw["last_turn_status"])
                if raw.get("last_turn_status")
                else None,
            )
        except ValueError as exc:
            raise CorruptRecord(f"{self.keys.conversation(cid)} does not parse: {exc}") from exc

    def _config(self, cid: str, raw: dict[str, str]) -> ConversationConfig:
        try:
            return ConversationConfig.model_validate_json(raw.get("config", ""))
        except ValidationError as exc:
            raise CorruptRecord(f"config of {self.keys.conversation(cid)} does not parse") from exc

    def submit(
        self,
        cid: str,
        prompt: Content,
        policy: DoubleTextPolicy | None = None,
        *,
        options: PromptOptions | None = None,
        advance: QueuedTask | None = None,
        turn_id: str | None = None,
    ) -> Submission:
        """Queues a turn under the conversation's double-text policy.

        With `advance`, the script pushes that task too: the turn and its `advance` are one
        write (see `shared.client.task_message`); without, the caller sends it after. A
        `turn_id` the caller chose makes a retry safe: the same prompt under a taken id is
        answered as accepted (`replayed`) and queued once; another prompt is a Conflict.
        """
        with (
            storage_errors(f"submitting a prompt to conversation {cid}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            tid = self.queue_submit(
                pipe, cid, prompt, policy, options=options, advance=advance, turn_id=turn_id
            )
            wait = ReplicaWait.of(self.settings)
            if wait is not None:
                wait.queue(pipe)
            replies = pipe.execute()
        reply = replies[-2 if wait else -1]
        submission = Submission(
            turn_id=tid,
            after_event_id=self.check_submit(cid, reply, tid),
            replayed=reply[0] == "exists",
        )
        if wait is not None:
            wait.check(replies[-1], f"prompt {tid} to conversation {cid}")
        return submission

    def queue_submit(
        self,
        pipe: Any,
        cid: str,
        prompt: Content,
        policy: DoubleTextPolicy | None = None,
        *,
        owner: str = "",
        index: bool = True,
        options: PromptOptions | None = None,
        advance: QueuedTask | None = None,
        turn_id: str | None = None,
    ) -> str:
        """Queues the submit script (and, with `index`, the sweeper's entry); returns the turn id.

        Without a policy, the conversation's own (stored at creation) applies. With an
        `owner`, the turn is queued only into a conversation that owner created. A held
        conversation is indexed when it is released, not here. `options` are this turn's.
        """
        tid = new_id() if turn_id is None else check_id(turn_id, "turn id")
        keys = {
            "conversation": self.keys.conversation(cid),
            "inbox": self.keys.inbox(cid),
            "turn": self.keys.turn(cid, tid),
            "events": self.keys.events(cid),
            "turn_ids": self.keys.turn_ids(cid),
        }
        args = {
            "cid": cid,
            "turn_id": tid,
            "prompt": prompt.model_dump_json(),
            "policy": policy.value if policy else "",
            "now": time.time(),
            **self._emit_args(cid),
            "owner": owner,
            "options": "" if options is None or options.is_empty() else options.model_dump_json(),
            "title": prompt.headline,  # the conversation's title, from its first prompt
            "queue": advance.key if advance else "",
            "advance": advance.message if advance else "",
        }
        if index:
            pipe.zadd(self.keys.active(self.keys.shard_of(cid)), {cid: time.time()})
        _SUBMIT.queue(pipe, _SUBMIT.keys_from(keys), _SUBMIT.args_from(args))
        return tid

    def check_submit(self, cid: str, reply: list[Any], tid: str = "") -> str:
        """The event id after which the turn's events come, or why it was refused."""
        outcome = reply[0]
        if outcome == "exists":  # a retry: its events may have begun, so from the start
            return "0-0"
        if outcome == "conflict":
            raise Conflict(
                f"turn {tid} of conversation {cid} exists with another prompt: an idempotency "
                "key is used for one prompt only"
            )
        if outcome == "not_found":
            raise NotFound(f"conversation {cid} does not exist")
        if outcome == "not_owner":
            raise Conflict(f"conversation {cid} exists and was created by someone else")
        if outcome == "closed":
            raise ConversationClosed(f"conversation {cid} is closed; its history stays readable")
        if outcome == "archiving":
            raise Conflict(f"conversation {cid} is being archived: it takes no more prompts")
        if outcome == "busy":
            raise Conflict(
                f"conversation {cid} is busy with turn {reply[1] or '(queued)'} and its "
                "double-text policy is 'reject'; wait for it or abort it"
            )
        return str(reply[1])

    def abort(self, cid: str, *, close: bool = False) -> str:
        """Ends queued turns now and flags the active one; returns the active turn id or ''."""
        with storage_errors(f"aborting conversation {cid}"):
            reply = _ABORT(self.client, *self.abort_call(cid, close=close))
        return self.check_abort(cid, reply)

    def abort_call(self, cid: str, *, close: bool = False) -> tuple[list[str], list[Any]]:
        keys = {
            "conversation": self.keys.conversation(cid),
            "inbox": self.keys.inbox(cid),
            "events": self.keys.events(cid),
        }
        closed = encode_event(StatusEvent(conversation_id=cid, status=ConversationStatus.CLOSED))
        args = {
            "cid": cid,
            "now": time.time(),
            **self._emit_args(cid),
            "close": int(close),
            "closed_event": closed,
        }
        return _ABORT.keys_from(keys), _ABORT.args_from(args)

    @staticmethod
    def abort_script() -> LuaScript:
        return _ABORT

    def check_abort(self, cid: str, reply: list[Any]) -> str:
        if reply[0] == "not_found":
            raise NotFound(f"conversation {cid} does not exist")
        return str(reply[1])

    def turn(self, cid: str, tid: str) -> TurnRecord:
        with storage_errors(f"reading turn {tid} of conversation {cid}"):
            raw: dict[str, str] = self.client.hgetall(self.keys.turn(cid, tid))  # type: ignore[assignment]
        return self.parse_turn(cid, tid, raw)

    def parse_turn(self, cid: str, tid: str, raw: dict[str, str]) -> TurnRecord:
        if not raw:
            raise NotFound(f"turn {tid} of conversation {cid} does not exist")
        try:
            prompt = Content.model_validate_json(raw["prompt"])
            options = PromptOptions.model_validate_json(raw.get("options") or "{}")
        except (KeyError, ValidationError) as exc:
            raise CorruptRecord(f"prompt of {self.keys.turn(cid, tid)} does not parse") from exc
        return TurnRecord(
            cid,
            tid,
            prompt,
            TurnStatus(raw.get("status", "queued")),
            float(raw.get("created_at", 0)),
            raw,
            options,
        )

    def ids(self, *, offset: int = 0, limit: int = 50) -> list[str]:
        """Conversation ids, newest first."""
        with storage_errors("listing conversations"):
            found = zset_page(
                self.client, self.keys.every_shard(self.keys.conversations), offset, limit
            )
        return [cid for cid, _ in found]

    def failed_ids(self, *, offset: int = 0, limit: int = 50) -> list[str]:
        """Conversations by when a turn of theirs last failed, newest first.

        The worker's flush indexes a failed turn's conversation as it writes the end; an
        entry stays when the conversation runs again, so a reader checks `failed` on the
        records. The newest `FAILURES_KEPT` (worker/writer.py) are kept.
        """
        with storage_errors("listing failed conversations"):
            found = zset_page(self.client, self.keys.every_shard(self.keys.failures), offset, limit)
        return [cid for cid, _ in found]

    def count(self) -> int:
        with storage_errors("counting conversations"):
            return zset_total(self.client, self.keys.every_shard(self.keys.conversations))

    def ids_by_status(
        self,
        status: ConversationStatus,
        *,
        offset: int = 0,
        limit: int = 50,
        on_corrupt: OnCorrupt | None = None,
    ) -> tuple[list[str], bool]:
        """Ids in `status`, newest first, and whether more follow.

        Walks the index a chunk at a time (one round trip per chunk for the statuses),
        so a page costs what it skips, not what the whole index holds.
        """
        matched: list[str] = []
        position = 0
        while len(matched) <= offset + limit:
            chunk = self.ids(offset=position, limit=_STATUS_SCAN_CHUNK)
            if not chunk:
                break
            found = self.statuses(chunk, on_corrupt=on_corrupt)
            matched += [cid for cid, s in zip(chunk, found, strict=True) if s is status]
            position += len(chunk)
        return matched[offset : offset + limit], len(matched) > offset + limit

    def statuses(
        self, ids: list[str], *, on_corrupt: OnCorrupt | None = None
    ) -> list[ConversationStatus | None]:
        """The status of each conversation (None for one that is gone), pipelined.

        An unknown status raises `CorruptRecord`, or, given `on_corrupt`, is reported to it
        and read as None.
        """
        with (
            storage_errors("reading conversation statuses"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for cid in ids:
                pipe.hget(self.keys.conversation(cid), "status")
            found = pipe.execute()
        return [self._status(cid, s, on_corrupt) for cid, s in zip(ids, found, strict=True)]

    def _status(
        self, cid: str, raw: str | None, on_corrupt: OnCorrupt | None
    ) -> ConversationStatus | None:
        try:
            return None if raw is None else ConversationStatus(raw)
        except ValueError:
            error = CorruptRecord(f"status of {self.keys.conversation(cid)} is {str(raw)[:30]!r}")
            if on_corrupt is None:
                raise error from None
            on_corrupt(error)
            return None

    def records(
        self, ids: list[str], *, on_corrupt: OnCorrupt | None = None
    ) -> list[ConversationRecord]:
        """The records of `ids` in one round trip, leaving out any that are gone.

        A record that does not parse raises `CorruptRecord`, or, given `on_corrupt`, is
        reported to it and left out too: one bad record cannot take a listing down.
        """
        with (
            storage_errors("reading conversations"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for cid in ids:
                self.queue_get(pipe, cid)
            results = pipe.execute()
        found: list[ConversationRecord] = []
        for i, cid in enumerate(ids):
            if not results[2 * i]:
                continue
            try:
                found.append(self.parse_get(cid, results[2 * i : 2 * i + 2]))
            except CorruptRecord as exc:
                if on_corrupt is None:
                    raise
                on_corrupt(exc)
        return found

    def _emit_args(self, cid: str) -> dict[str, Any]:
        """The arguments every script that emits takes (`_EMIT_ARGS`)."""
        return {
            "maxlen": self.settings.stream_maxlen,
            "ttl_ms": self.settings.events_ttl_s * 1000,
            "channel": self.keys.live(cid),
            "channel_all": self.keys.live_all(),
        }
