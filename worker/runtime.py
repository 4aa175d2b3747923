"""The `advance` leg: take the lease, run queued or resumed turns, let go.

A leg never waits for a human: it ends at a park, at the end of the inbox, or
when its time slice is used, and then asks for another leg if work remains.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import redis
from pydantic import ValidationError

from shared.conversations import ConversationStore
from shared.errors import CorruptRecord
from shared.events import ConversationStatus
from shared.history import HistoryStore
from shared.keys import KeySpace
from shared.lua import LuaScript
from shared.redis_client import storage_errors
from shared.settings import Settings
from worker.checkpoint import TurnCheckpoint
from worker.lease import Lease, try_acquire
from worker.leg import Leg
from worker.providers.registry import ProviderFactory
from worker.tools import ToolRegistry, default_registry
from worker.turn import LegOutcome, TurnMachine
from worker.writer import LeaseLost, Writer

__all__ = ["Runtime"]

log = logging.getLogger(__name__)

# KEYS: conv, inbox   ->  the active turn, else the next queued one made active, else nil
_CLAIM = LuaScript(
    """
local active = redis.call('HGET', KEYS[1], 'active_turn') or ''
if active ~= '' then return active end
local tid = redis.call('LPOP', KEYS[2])
if not tid then return false end
redis.call('HSET', KEYS[1], 'active_turn', tid)
return tid
"""
)


class Runtime:
    """Runs legs for any conversation; one per worker process, shared by its threads."""

    def __init__(
        self,
        settings: Settings,
        client: redis.Redis,
        *,
        send_advance: Callable[[str], None],
        registry: ToolRegistry | None = None,
        providers: ProviderFactory | None = None,
    ) -> None:
        self.settings = settings
        self.client = client
        self.keys = KeySpace(settings.key_prefix)
        self.send_advance = send_advance
        self.registry = registry or default_registry(settings)
        self.providers = providers or ProviderFactory(settings)
        self.conversations = ConversationStore(client, self.keys, settings)

    def advance(self, cid: str) -> str:
        """One leg for conversation `cid`; returns what happened, for logs and tests."""
        lease = try_acquire(self.client, self.keys, cid, self.settings.lease_ttl_ms)
        if lease is None:
            return "busy"
        outcome = "idle"
        try:
            outcome = self._run(cid, lease)
        except LeaseLost:
            log.warning("conversation %s: lease lost; another worker continues", cid)
            return "lost"
        finally:
            more = lease.release()
        if more:
            self.send_advance(cid)
        return outcome

    def _run(self, cid: str, lease: Lease) -> str:
        started = time.monotonic()
        outcome = "idle"
        while time.monotonic() - started < self.settings.leg_time_slice_s:
            with storage_errors(f"claiming work of conversation {cid}"):
                tid = _CLAIM(self.client, [self.keys.conversation(cid), self.keys.inbox(cid)], [])
            if not tid:
                return outcome
            record = self.conversations.get(cid)
            if record.status is ConversationStatus.WAITING_FOR_USER:
                return "parked"
            result = TurnMachine(
                self._leg(cid, str(tid), lease), self.registry, self.providers
            ).run()
            if result is not LegOutcome.FINISHED:
                return result.value
            outcome = "finished"
        return "yielded"

    def _leg(self, cid: str, tid: str, lease: Lease) -> Leg:
        record = self.conversations.get(cid)
        turn = self.conversations.turn(cid, tid)
        config = record.config
        limit = (
            self.settings.max_history_size
            if config.max_history_size is None
            else config.max_history_size
        )
        writer = Writer(
            self.client,
            self.keys,
            self.settings,
            cid,
            token=lease.token,
            turn_id=tid,
            max_history_size=limit,
            model=config.model,
        )
        writer.next_position = int(self.client.hget(self.keys.history_meta(cid), "appended") or 0)
        return Leg(
            client=self.client,
            keys=self.keys,
            settings=self.settings,
            config=config,
            turn=turn,
            lease=lease,
            writer=writer,
            history=HistoryStore(self.client, self.keys, cid, max_history_size=limit),
            checkpoint=self._checkpoint(turn.fields.get("checkpoint", ""), cid, tid),
        )

    def _checkpoint(self, raw: str, cid: str, tid: str) -> TurnCheckpoint:
        if not raw:
            return TurnCheckpoint()
        try:
            return TurnCheckpoint.model_validate_json(raw)
        except ValidationError as exc:
            raise CorruptRecord(f"checkpoint of {self.keys.turn(cid, tid)} does not parse") from exc

    def sweep(self) -> list[str]:
        """Re-sends `advance` for conversations with work but no lease (a worker died)."""
        resent = []
        with storage_errors("sweeping active conversations"):
            active = [str(cid) for cid in self.client.zrange(self.keys.active(), 0, -1)]
        for cid in active:
            if self._needs_leg(cid):
                self.send_advance(cid)
                resent.append(cid)
        return resent

    def _needs_leg(self, cid: str) -> bool:
        with self.client.pipeline(transaction=True) as pipe:
            pipe.exists(self.keys.lease(cid))
            pipe.hmget(self.keys.conversation(cid), "active_turn", "status")
            pipe.llen(self.keys.inbox(cid))
            leased, (active, status), queued = pipe.execute()
        if leased:
            return False
        if active and status != ConversationStatus.WAITING_FOR_USER.value:
            return True
        if not active and queued:
            return True
        if not active:
            self.client.zrem(self.keys.active(), cid)
        return False
