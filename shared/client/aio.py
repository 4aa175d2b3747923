"""The asyncio client: the same conversations and semantics as `shared.client`, on redis.asyncio.

Reads, submissions and event following are native async Redis calls; sending the
Celery task (a short, non-blocking publish), creating a conversation and forking one
(a WATCHed MULTI, as the sync client's) run in a thread.

An `AsyncClient` belongs to one event loop (redis.asyncio connections do): its tasks
share `client_redis_connections` connections, and a task beyond them waits for a free
one (up to `redis_pool_wait_s`, then StorageError). Use one client per loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from shared.client import Prompt
from shared.client.drivers import drive_async
from shared.client.follow import IdleWaiter, TurnFollower, current_turn
from shared.client.tasks import TaskSender
from shared.errors import Conflict
from shared.models.chunks import StreamChunk
from shared.models.config import ConversationConfig, ConversationOptions
from shared.models.events import ChatResponse, EventBase
from shared.models.steps import Step, UsageMetadata
from shared.settings import Settings, load_settings
from shared.store.agents import resolve_options
from shared.store.bundle import Stores
from shared.store.connection import ASYNC_CLIENT_POOL, connect, connect_async, storage_errors
from shared.store.conversations import ConversationRecord
from shared.store.event_log import parse_event
from shared.store.forks import fork_config, fork_conversation
from shared.store.history import HistorySnapshot, HistoryStore
from shared.validation import (
    conversation_options,
    prompt_options,
    validate_prompt,
)
from shared.workspace import FileRead
from shared.workspace import read_file as read_workspace_file

__all__ = ["AsyncClient", "AsyncConversation"]


class AsyncClient:
    """Async entry point for one event loop; `new_conversation` takes `Client`'s options."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        self.redis = connect_async(self.settings, pool=ASYNC_CLIENT_POOL)
        self.tasks = TaskSender(self.settings)
        # The stores' pure halves (key names, arguments, parsing) are shared with the sync
        # client; their blocking calls (creation, a fork's WATCHed MULTI) run in a thread.
        sync_redis = connect(self.settings, pool=ASYNC_CLIENT_POOL)
        self.stores = Stores.build(sync_redis, self.settings, self.tasks)
        self.keys = self.stores.keys
        self.store = self.stores.conversations
        self.agents = self.stores.agents

    async def new_conversation(
        self,
        options: ConversationOptions | None = None,
        /,
        *,
        conversation_id: str | None = None,
        owner: str = "",
        policy_may_loosen: bool = True,
        **chosen: Any,
    ) -> AsyncConversation:
        """`Client.new_conversation`, awaited."""
        config = await asyncio.to_thread(
            resolve_options,
            conversation_options(options, **chosen),
            self.settings,
            policy_may_loosen=policy_may_loosen,
            agents=self.agents,
        )
        return await self.create(config, conversation_id=conversation_id, owner=owner)

    async def create(
        self, config: ConversationConfig, *, conversation_id: str | None = None, owner: str = ""
    ) -> AsyncConversation:
        cid = await asyncio.to_thread(
            self.store.create, config, conversation_id=conversation_id, owner=owner
        )
        return AsyncConversation(self, cid)

    async def conversation(self, conversation_id: str) -> AsyncConversation:
        conversation = AsyncConversation(self, conversation_id)
        await conversation.record()
        return conversation

    async def aclose(self) -> None:
        await self.redis.aclose()
        self.store.client.close()
        self.tasks.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncConversation:
    """An async handle on one conversation; `async for chunk in await conv.chat(...)`."""

    def __init__(self, client: AsyncClient, conversation_id: str) -> None:
        self.client = client
        self.conversation_id = conversation_id

    async def record(self) -> ConversationRecord:
        store = self.client.store
        with storage_errors(f"reading conversation {self.conversation_id}"):
            async with self.client.redis.pipeline(transaction=True) as pipe:
                store.queue_get(pipe, self.conversation_id)
                results = await pipe.execute()
        return store.parse_get(self.conversation_id, results)

    async def _submit(self, content: Prompt, options: dict[str, Any]) -> tuple[str, str]:
        """`Conversation.submit`: `turn_id` in `options` makes a retry safe."""
        chosen = options.pop("turn_id", None)
        checked = prompt_options(**options)
        prompt = validate_prompt(content, self.client.settings)
        if checked.model_settings is not None:
            checked.check_for((await self.record()).config)
        store = self.client.store
        with storage_errors(f"submitting a prompt to conversation {self.conversation_id}"):
            async with self.client.redis.pipeline(transaction=False) as pipe:
                turn_id = store.queue_submit(
                    pipe, self.conversation_id, prompt, options=checked, turn_id=chosen
                )
                reply = (await pipe.execute())[-1]
        after = store.check_submit(self.conversation_id, reply, turn_id)
        if reply[0] != "exists":  # a retry's turn has had its advance
            await asyncio.to_thread(self.client.tasks.advance, self.conversation_id)
        return turn_id, after

    # Every send method takes the prompt's own options (`PromptOptions`, as keywords), for
    # its turn only.

    async def send(self, content: Prompt, **options: Any) -> str:
        return (await self._submit(content, options))[0]

    async def chat(self, content: Prompt, **options: Any) -> AsyncIterator[StreamChunk]:
        """Sends at once; the returned iterator yields the turn's chunks."""
        turn_id, after = await self._submit(content, options)
        return self._chunks_of(turn_id, after)

    async def _chunks_of(self, turn_id: str, after: str) -> AsyncIterator[StreamChunk]:
        follower = TurnFollower(self.conversation_id, turn_id, after=after)
        async for event in self.follow(follower):
            for chunk in follower.chunks(event):
                yield chunk
        if follower.error is not None:
            raise follower.error

    async def chat_to_completion(self, content: Prompt, **options: Any) -> ChatResponse:
        turn_id, after = await self._submit(content, options)
        return await self.wait_for_turn(turn_id, after_event_id=after)

    async def chat_content(self, content: Prompt, **options: Any) -> ChatResponse:
        return await self.chat_to_completion(content, **options)

    async def wait_for_turn(
        self, turn_id: str, *, after_event_id: str = "0-0", timeout: float | None = None
    ) -> ChatResponse:
        follower = TurnFollower(
            self.conversation_id, turn_id, after=after_event_id, timeout_s=timeout
        )
        async for _ in self.follow(follower):
            pass
        return follower.result()

    async def events(
        self, turn_id: str | None = None, *, after_event_id: str = "0-0"
    ) -> AsyncIterator[EventBase]:
        """`Conversation.events`: a turn's typed events, live, through its terminal one."""
        turn_id = turn_id or await self._current_turn()
        follower = TurnFollower(self.conversation_id, turn_id, after=after_event_id)
        async for event in self.follow(follower):
            if event.turn_id == turn_id:
                yield event

    async def receive_steps(
        self, turn_id: str, *, after_event_id: str = "0-0"
    ) -> AsyncIterator[Step]:
        follower = TurnFollower(self.conversation_id, turn_id, after=after_event_id)
        async for event in self.follow(follower):
            for step in follower.steps(event):
                yield step

    async def receive_chunks(
        self, turn_id: str, *, after_event_id: str = "0-0"
    ) -> AsyncIterator[StreamChunk]:
        async for chunk in self._chunks_of(turn_id, after_event_id):
            yield chunk

    async def _wait_events(self, after: str, block_ms: int) -> list[EventBase]:
        key = self.client.keys.events(self.conversation_id)
        with storage_errors(f"waiting for events of conversation {self.conversation_id}"):
            reply: Any = await self.client.redis.xread({key: after}, count=500, block=block_ms)
        if not reply:
            return []
        return [parse_event(key, str(sid), str(fields["e"])) for sid, fields in reply[0][1]]

    def follow(self, follower: TurnFollower) -> AsyncIterator[EventBase]:
        """`Conversation.follow`: every event until the follower's turn ends."""

        async def read_turn() -> dict[str, str]:
            key = self.client.keys.turn(self.conversation_id, follower.turn_id)
            with storage_errors(f"reading turn {follower.turn_id} of {self.conversation_id}"):
                fields: dict[str, str] = await self.client.redis.hgetall(key)  # type: ignore[assignment]
            return fields

        return drive_async(follower, self._wait_events, read_turn)

    async def _current_turn(self) -> str:
        """As the sync client's: the running or next queued turn, read in one transaction."""
        cid, keys = self.conversation_id, self.client.keys
        with storage_errors(f"reading the turns of conversation {cid}"):
            async with self.client.redis.pipeline(transaction=True) as pipe:
                pipe.exists(keys.conversation(cid))
                pipe.hget(keys.conversation(cid), "active_turn")
                pipe.lindex(keys.inbox(cid), 0)
                exists, active, queued = await pipe.execute()
        return current_turn(cid, exists, active, queued)

    async def snapshot(self) -> HistorySnapshot:
        store = HistoryStore(self.client.store.client, self.client.keys, self.conversation_id)
        with storage_errors(f"reading history of conversation {self.conversation_id}"):
            async with self.client.redis.pipeline(transaction=True) as pipe:
                store.queue_snapshot(pipe)
                results = await pipe.execute()
        return store.parse_snapshot(results)

    @property
    async def history(self) -> list[Step]:
        return (await self.snapshot()).steps

    @property
    async def turn_count(self) -> int:
        return (await self.snapshot()).turn_count

    @property
    async def compaction_indices(self) -> list[int]:
        return (await self.snapshot()).compaction_indices

    @property
    async def last_response(self) -> str:
        return (await self.snapshot()).last_response

    @property
    async def last_structured_output(self) -> Any:
        return (await self.snapshot()).last_structured_output

    @property
    async def total_usage(self) -> UsageMetadata:
        return (await self.snapshot()).cumulative_usage

    @property
    async def last_turn_usage(self) -> UsageMetadata | None:
        return (await self.snapshot()).turn_usage

    async def fork(
        self,
        at_step: int,
        *,
        conversation_id: str | None = None,
        agent: str | None = None,
        agent_version: int | None = None,
        owner: str = "",
    ) -> AsyncConversation:
        """`Conversation.fork`: a new, idle conversation with this one's first `at_step` steps."""
        stores = self.client.stores
        original = (await self.record()).config
        config = await asyncio.to_thread(
            fork_config, stores, original, agent=agent, agent_version=agent_version
        )
        cid = await asyncio.to_thread(
            fork_conversation,
            stores,
            self.conversation_id,
            at_step=at_step,
            config=config,
            owner=owner,
            conversation_id=conversation_id,
        )
        return AsyncConversation(self.client, cid)

    @property
    async def is_idle(self) -> bool:
        record = await self.record()
        return not record.active_turn and record.queued == 0

    async def wait_for_idle(self, timeout: float | None = None) -> bool:
        key = self.client.keys.events(self.conversation_id)
        last = await self.client.redis.xrevrange(key, count=1)
        waiter = IdleWaiter(after=str(last[0][0]) if last else "0-0", timeout_s=timeout)
        async for _ in drive_async(waiter, self._wait_events, lambda: self.is_idle):
            pass
        return waiter.idle

    async def clear_history(self) -> None:
        if not await self.is_idle:
            raise Conflict(
                f"conversation {self.conversation_id} has a turn running or queued; abort it first"
            )
        await self.client.redis.delete(
            *HistoryStore(self.client.store.client, self.client.keys, self.conversation_id).keys
        )

    async def abort(self) -> None:
        await self._abort(close=False)

    async def close(self, timeout: float | None = 60.0) -> None:
        """Refuses new prompts for good, aborts, and returns once the turn has settled.

        A turn still running after `timeout` seconds raises TimeoutError (None: no limit;
        0: return at once and let it settle in the background).
        """
        await self._abort(close=True)
        if timeout != 0 and not await self.wait_for_idle(timeout):
            raise TimeoutError(
                f"conversation {self.conversation_id} is closed, but its turn had not "
                f"settled within {timeout}s (is a worker running?)"
            )

    async def _abort(self, *, close: bool) -> None:
        store = self.client.store
        keys, args = store.abort_call(self.conversation_id, close=close)
        script = store.abort_script()
        with storage_errors(f"aborting conversation {self.conversation_id}"):
            reply = await self.client.redis.eval(script.body, len(keys), *keys, *args)
        if store.check_abort(self.conversation_id, reply):
            await asyncio.to_thread(self.client.tasks.advance, self.conversation_id)

    async def read_file(self, path: str) -> FileRead:
        """`Conversation.read_file`: the same confined, exact read, in a thread."""
        await self.record()  # NotFound for a conversation that does not exist, as in the API
        return await asyncio.to_thread(read_workspace_file, path, self.client.settings)
