"""The Python client: open conversations, send prompts, stream chunks, read history.

A `Conversation` is a handle on state that lives in Redis: any number of
handles, in any process, see the same conversation. Reading a stream is only
observation: dropping it cancels nothing; `abort()` does.

Threads: one `Client` may be shared by any number of threads. Its Redis pool holds
`client_redis_connections` connections and its task sender `broker_connections`; a
thread beyond them waits for a free one (up to `redis_pool_wait_s`, then StorageError)
instead of failing. A `Conversation` is a thin, stateless handle (a client and an id),
so it is thread-safe too.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import redis

from shared.client.drivers import drive
from shared.client.follow import IdleWaiter, TurnFollower, current_turn
from shared.client.receiver import NotificationReceiver
from shared.client.shard_receiver import ShardReceiver
from shared.client.tasks import TaskSender
from shared.errors import Conflict, NotFound
from shared.models.chunks import StreamChunk
from shared.models.config import ConversationConfig, ConversationOptions
from shared.models.content import Content, ContentPart
from shared.models.events import ChatResponse, ConversationStatus, EventBase
from shared.models.notifications import Notification, Resolution
from shared.models.steps import Step, UsageMetadata
from shared.settings import Settings, load_settings
from shared.store.agents import resolve_options
from shared.store.bundle import Stores
from shared.store.connection import CLIENT_POOL, connect, storage_errors
from shared.store.conversations import ConversationRecord, Submission
from shared.store.forks import fork_config, fork_conversation
from shared.store.history import HistorySnapshot, HistoryStore
from shared.validation import (
    conversation_options,
    prompt_options,
    validate_prompt,
)
from shared.workspace import FileRead
from shared.workspace import read_file as read_workspace_file

__all__ = ["Client", "Conversation"]

Prompt = str | Content | list[ContentPart]
"""What every send method accepts: plain text (or `/command`), Content, or parts."""


class Client:
    """Entry point: settings from the environment when omitted. Share one across threads."""

    def __init__(
        self, settings: Settings | None = None, *, redis_client: redis.Redis | None = None
    ) -> None:
        self.settings = settings or load_settings()
        self.redis = redis_client or connect(self.settings, pool=CLIENT_POOL)
        self.tasks = TaskSender(self.settings)
        self.stores = Stores.build(self.redis, self.settings, self.tasks)
        self.keys = self.stores.keys
        self.store = self.stores.conversations
        self.events = self.stores.events
        self.notifications = self.stores.notifications

    def new_conversation(
        self,
        options: ConversationOptions | None = None,
        /,
        *,
        conversation_id: str | None = None,
        owner: str = "",
        policy_may_loosen: bool = True,
        **chosen: Any,
    ) -> Conversation:
        """Creates a conversation: `ConversationOptions`, or its fields as keywords.

        Every omitted option defaults from settings; a bad or unknown one is InvalidInput
        naming it. `agent="name"` runs as that named agent (its latest version, or
        `agent_version`): its options are used and recorded with its name and version.
        `policy_may_loosen`: whether `tools` and `allow_all` may loosen the
        operator's tool policy. True for a direct client (it holds the Redis credentials);
        the web sets it from the caller's role. `owner` records who created it.
        """
        config = resolve_options(
            conversation_options(options, **chosen),
            self.settings,
            policy_may_loosen=policy_may_loosen,
            agents=self.stores.agents,
        )
        return self.create(config, conversation_id=conversation_id, owner=owner)

    def create(
        self, config: ConversationConfig, *, conversation_id: str | None = None, owner: str = ""
    ) -> Conversation:
        cid = self.store.create(config, conversation_id=conversation_id, owner=owner)
        return Conversation(self, cid)

    def conversation(self, conversation_id: str) -> Conversation:
        """A handle on an existing conversation (NotFound when there is none)."""
        self.store.get(conversation_id)
        return Conversation(self, conversation_id)

    def notification_stream(
        self, *, group: str = "operators", consumer: str | None = None, min_idle_ms: int = 30_000
    ) -> NotificationReceiver | ShardReceiver:
        """Every conversation's notifications, exclusive within `group`, at least once."""
        consumer = consumer or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        receivers = [
            NotificationReceiver(
                self.redis,
                self.notifications,
                stream,
                group=group,
                consumer=consumer,
                min_idle_ms=min_idle_ms,
            )
            for stream in self.keys.every_shard(self.keys.notification_stream)
        ]
        return receivers[0] if len(receivers) == 1 else ShardReceiver(self.keys, receivers)

    def resolve_notification(
        self, notification_id: str, resolution: Resolution | dict[str, Any], *, actor: str
    ) -> Notification:
        """Allow, Deny or Submit by exact id; the first resolution wins (later ones: Conflict)."""
        return self.notifications.resolve(notification_id, resolution, actor=actor)

    def close(self) -> None:
        self.tasks.close()
        self.redis.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Conversation:
    """A handle on one conversation; its state lives in Redis, so the handle is thread-safe."""

    def __init__(self, client: Client, conversation_id: str) -> None:
        self.client = client
        self.conversation_id = conversation_id

    # Sending
    #
    # Every send method takes the prompt's own options (`PromptOptions`, as keywords), for its
    # turn only: `tool_selection`, `timeout_s` and `response_schema` override the
    # conversation's.

    def send(self, content: Prompt, **options: Any) -> str:
        """Validates and queues a prompt; returns its turn id. Invalid prompts queue nothing.

        `turn_id=` (any send method) names the turn, as an idempotency key: sending the same
        prompt under it again (after a lost answer, say) queues nothing and returns it.
        """
        return self.submit(content, **options).turn_id

    def submit(self, content: Prompt, **options: Any) -> Submission:
        """`send`, answering also the event id its turn's events follow and whether the
        turn id was taken by this same prompt already (`replayed`: nothing was queued)."""
        chosen = options.pop("turn_id", None)
        checked = prompt_options(**options)
        prompt = validate_prompt(content, self.client.settings)
        if checked.model_settings is not None:
            checked.check_for(self.client.store.get(self.conversation_id).config)
        advance = self.client.tasks.queued_advance(self.conversation_id)
        return self.client.store.submit(
            self.conversation_id, prompt, options=checked, advance=advance, turn_id=chosen
        )

    def chat(self, content: Prompt, **options: Any) -> Iterator[StreamChunk]:
        """Sends a prompt and yields its Thought, Text and ToolCall chunks as they arrive.

        The prompt is sent at once, before the first chunk is asked for. The stream ends
        with the turn: a failed turn raises TurnFailed, an aborted one Cancelled.
        """
        submission = self.submit(content, **options)
        return self._chunks_of(submission.turn_id, submission.after_event_id)

    def _chunks_of(self, turn_id: str, after: str) -> Iterator[StreamChunk]:
        follower = TurnFollower(self.conversation_id, turn_id, after=after)
        for event in self.follow(follower):
            yield from follower.chunks(event)
        if follower.error is not None:
            raise follower.error

    def chat_to_completion(self, content: Prompt, **options: Any) -> ChatResponse:
        """Sends a prompt and returns the authoritative completed value of its turn."""
        submission = self.submit(content, **options)
        return self.wait_for_turn(submission.turn_id, after_event_id=submission.after_event_id)

    def chat_content(self, content: Content, **options: Any) -> ChatResponse:
        """`chat_to_completion` for multimodal Content (text, media, slash commands)."""
        return self.chat_to_completion(content, **options)

    def wait_for_turn(
        self, turn_id: str, *, after_event_id: str = "0-0", timeout: float | None = None
    ) -> ChatResponse:
        """Waits for a turn's terminal event and returns its response (or raises its error)."""
        follower = TurnFollower(
            self.conversation_id, turn_id, after=after_event_id, timeout_s=timeout
        )
        for _ in self.follow(follower):
            pass
        return follower.result()

    # Receiving

    def events(
        self, turn_id: str | None = None, *, after_event_id: str = "0-0"
    ) -> Iterator[EventBase]:
        """A turn's typed events (the running or next queued turn's when omitted), live.

        The last one is its CompletedEvent, FailedEvent or CancelledEvent; nothing is
        raised for a failed turn. When the capped stream no longer holds that event (or
        it was never written), it is rebuilt from the turn record, without an `id`.
        """
        follower = self._follower(turn_id, after_event_id)
        for event in self.follow(follower):
            if event.turn_id == follower.turn_id:
                yield event

    def receive_steps(
        self, turn_id: str | None = None, *, after_event_id: str = "0-0"
    ) -> Iterator[Step]:
        """The raw steps of a turn (the active one when omitted), partial and finished, live."""
        follower = self._follower(turn_id, after_event_id)
        for event in self.follow(follower):
            yield from follower.steps(event)

    def receive_chunks(
        self, turn_id: str | None = None, *, after_event_id: str = "0-0"
    ) -> Iterator[StreamChunk]:
        """`receive_steps` through the chunk filter."""
        follower = self._follower(turn_id, after_event_id)
        for event in self.follow(follower):
            yield from follower.chunks(event)

    def _follower(self, turn_id: str | None, after: str) -> TurnFollower:
        return TurnFollower(self.conversation_id, turn_id or self._current_turn(), after=after)

    def _current_turn(self) -> str:
        """The running turn, else the next queued one, read in one transaction: a worker that
        claims the queued turn between two separate reads would leave neither to be seen."""
        cid, keys = self.conversation_id, self.client.keys
        with (
            storage_errors(f"reading the turns of conversation {cid}"),
            self.client.redis.pipeline(transaction=True) as pipe,
        ):
            pipe.exists(keys.conversation(cid))
            pipe.hget(keys.conversation(cid), "active_turn")
            pipe.lindex(keys.inbox(cid), 0)
            exists, active, queued = pipe.execute()
        return current_turn(cid, exists, active, queued)

    def follow(self, follower: TurnFollower) -> Iterator[EventBase]:
        """Every event of the conversation from the follower's cursor until its turn ends.

        Other turns' events too (a queued turn waits on them); when the stream is quiet,
        the turn record decides whether the turn has ended.
        """

        def read_turn() -> dict[str, str]:
            return self.client.store.turn(self.conversation_id, follower.turn_id).fields

        return drive(follower, self._read_events, read_turn)

    def _read_events(self, after: str, block_ms: int) -> list[EventBase]:
        return self.client.events.wait(self.conversation_id, after, block_ms=block_ms)

    # State

    def record(self) -> ConversationRecord:
        return self.client.store.get(self.conversation_id)

    def _history(self) -> HistoryStore:
        """The store for reading and clearing; its bound only matters to writers (the worker)."""
        return self.client.stores.history(self.conversation_id)

    def snapshot(self) -> HistorySnapshot:
        return self._history().snapshot()

    @property
    def history(self) -> list[Step]:
        return self.snapshot().steps

    @property
    def turn_count(self) -> int:
        return self.snapshot().turn_count

    @property
    def compaction_indices(self) -> list[int]:
        return self.snapshot().compaction_indices

    @property
    def last_response(self) -> str:
        return self.snapshot().last_response

    @property
    def last_structured_output(self) -> Any:
        return self.snapshot().last_structured_output

    @property
    def total_usage(self) -> UsageMetadata:
        return self.snapshot().cumulative_usage

    @property
    def last_turn_usage(self) -> UsageMetadata | None:
        return self.snapshot().turn_usage

    def clear_history(self) -> None:
        """Resets steps, turns, compactions and usage; refused while a turn runs."""
        if not self.is_idle:
            raise Conflict(
                f"conversation {self.conversation_id} has a turn running or queued; abort it first"
            )
        self._history().clear()

    def fork(
        self,
        at_step: int,
        *,
        conversation_id: str | None = None,
        agent: str | None = None,
        agent_version: int | None = None,
        owner: str = "",
    ) -> Conversation:
        """A new, idle conversation whose history is this one's first `at_step` steps.

        Its configuration is this one's, or the agent's (or this agent's `agent_version`).
        InvalidInput naming `at_step` past the history or between a tool call and its
        result; this conversation is only read.
        """
        stores = self.client.stores
        config = fork_config(stores, self.record().config, agent=agent, agent_version=agent_version)
        cid = fork_conversation(
            stores,
            self.conversation_id,
            at_step=at_step,
            config=config,
            owner=owner,
            conversation_id=conversation_id,
        )
        return Conversation(self.client, cid)

    @property
    def is_idle(self) -> bool:
        record = self.record()
        return not record.active_turn and record.queued == 0

    def wait_for_idle(self, timeout: float | None = None) -> bool:
        """Returns once no turn runs or waits (True), or False at the timeout. Woken by Redis."""
        waiter = IdleWaiter(
            after=self.client.events.last_id(self.conversation_id), timeout_s=timeout
        )
        for _ in drive(waiter, self._read_events, lambda: self.is_idle):
            pass
        return waiter.idle

    def abort(self) -> None:
        """Ends the running turn and every queued one; a parked turn ends too."""
        active = self.client.store.abort(self.conversation_id)
        if active:
            self.client.tasks.advance(self.conversation_id)

    def close(self, timeout: float | None = 60.0) -> None:
        """Refuses new prompts for good, aborts, and returns once the turn has settled.

        Settled: the running turn (and every queued one) has ended, cancelled or
        completed; history stays readable. The refusal holds at once, whatever the wait;
        a turn still running after `timeout` seconds raises TimeoutError (None: no limit;
        0: return at once and let it settle in the background, as the web does).
        """
        active = self.client.store.abort(self.conversation_id, close=True)
        if active:
            self.client.tasks.advance(self.conversation_id)
        if timeout != 0 and not self.wait_for_idle(timeout):
            raise TimeoutError(
                f"conversation {self.conversation_id} is closed, but its turn had not "
                f"settled within {timeout}s (is a worker running?)"
            )

    @property
    def status(self) -> ConversationStatus:
        return self.record().status

    # Notifications

    def pending_notifications(self) -> list[Notification]:
        return self.client.notifications.pending(conversation_id=self.conversation_id)

    def resolve_notification(
        self,
        notification_id: str,
        resolution: Resolution | dict[str, Any],
        *,
        actor: str = "client",
    ) -> Notification:
        """Resolves one of this conversation's notifications by its exact id."""
        note = self.client.notifications.get(notification_id)
        if note.conversation_id != self.conversation_id:
            raise NotFound(
                f"notification {notification_id} is not part of conversation {self.conversation_id}"
            )
        return self.client.notifications.resolve(notification_id, resolution, actor=actor)

    def notification_stream(
        self, *, group: str = "default", consumer: str | None = None, min_idle_ms: int = 30_000
    ) -> NotificationReceiver:
        """This conversation's notifications: exclusive within `group`, durable, at least once."""
        stream = self.client.keys.conversation_notifications(self.conversation_id)
        return NotificationReceiver(
            self.client.redis,
            self.client.notifications,
            stream,
            group=group,
            consumer=consumer,
            min_idle_ms=min_idle_ms,
        )

    # Files

    def read_file(self, path: str) -> FileRead:
        """A workspace file's exact bytes, confined exactly as the worker's read_file tool is.

        `path` is relative to SIGNOFF_WORKSPACE_ROOTS, read from this process's filesystem
        (the workers' own). PathRefused for a path that leads outside the roots or names no
        readable file, NotFound for a missing file (or conversation), NotConfigured without
        roots.
        """
        self.record()  # NotFound for a conversation that does not exist, as in the API
        return read_workspace_file(path, self.client.settings)
