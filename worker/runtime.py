"""The `advance` leg: take the lease, run queued or resumed turns, let go.

A leg never waits for a human: it ends at a park, at the end of the inbox, or
when its time slice is used, and then asks for another leg if work remains.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import redis
from pydantic import ValidationError

from shared.client.task_message import QueuedTask
from shared.errors import CorruptRecord, NotFound, SignoffError, StorageError
from shared.logs import log_context
from shared.mcp.store import McpServerStore
from shared.models.events import ConversationStatus
from shared.models.notifications import Notification, NotificationStatus
from shared.settings import Settings
from shared.store.bundle import Stores
from shared.store.connection import ReplicaWait, connect, connection_lost, storage_errors
from shared.store.emit import EMIT_LUA
from shared.store.history import FROM_POSITION_LUA
from shared.store.lua import LuaScript
from shared.store.policy import ToolInfo
from shared.store.rate_limit import RateLimiter
from worker import tracing
from worker.batches.end import on_batch_item_flush
from worker.checkpoint import TurnCheckpoint
from worker.deltas import DeltaFlusher
from worker.lease import Lease
from worker.leg import Leg
from worker.mcp.pool import McpPool
from worker.providers.registry import ProviderFactory
from worker.spend import usage_scopes
from worker.sweep.sweeper import Sweeper, Swept
from worker.tool_ledger import ToolLedger
from worker.tools import ToolRegistry, default_registry
from worker.turn import LegOutcome, TurnMachine
from worker.writer import LeaseLost, Writer

__all__ = ["Runtime"]

log = logging.getLogger(__name__)

_CLAIM = LuaScript(
    "worker",
    "claim.lua",
    keys=[
        "conversation",
        "inbox",
        "history_meta",
        "lease",
        "fence",
        "events",
        "policy_rules",
        "steps",
        "compactions",
        "overflow",
    ],
    args=[
        "turn_prefix",
        "token",
        "ttl_ms",
        "note_prefix",
        "cid",
        "maxlen",
        "events_ttl_ms",
        "channel",
        "channel_all",
        "admitted",
    ],
    uses=[EMIT_LUA, FROM_POSITION_LUA],
)


class Runtime:
    """Runs legs for any conversation; one per worker process, shared by its threads."""

    def __init__(
        self,
        settings: Settings,
        client: redis.Redis,
        *,
        send_advance: Callable[[str], None],
        queue_advance: Callable[[str], QueuedTask] | None = None,
        send_advance_later: Callable[[str, float], None] | None = None,
        registry: ToolRegistry | None = None,
        providers: ProviderFactory | None = None,
    ) -> None:
        self.settings = settings
        self.send_advance_later = send_advance_later
        self.client = client
        advancer = (
            _Advancer(send_advance)
            if queue_advance is None
            else _QueuingAdvancer(send_advance, queue_advance)
        )
        self.stores = Stores.build(client, settings, advancer)
        self.keys = self.stores.keys
        self.send_advance = send_advance
        self.queue_advance = queue_advance
        self.registry = registry or default_registry(settings)
        self.mcp = McpPool(settings, McpServerStore(client, self.keys))
        self.providers = providers or ProviderFactory(settings)
        self.conversations = self.stores.conversations
        self.notifications = self.stores.notifications
        self.policies = self.stores.policies
        self.limiter = RateLimiter(client, self.keys, settings.rate_limits)
        self.deltas = DeltaFlusher(_own_connection(client, settings), self.keys, settings)
        self.renew_client = _own_connection(client, settings)  # the lease renewer's alone
        self.batches = self.stores.batches
        self.sweeper = Sweeper(
            client, self.keys, settings, batches=self.batches, send_advance=send_advance
        )
        self._publish_tools()

    def _publish_tools(self) -> None:
        """Describes this worker's tools, so the web can show and check tool policies."""
        tools = [self.registry.get(name) for name in self.registry.names()]
        infos = [
            ToolInfo(name=t.name, description=t.description, default_policy=t.policy) for t in tools
        ]
        try:
            self.policies.publish_catalog(infos)
        except SignoffError as exc:
            log.warning("could not publish the tool catalog (retried at the next start): %s", exc)

    def advance(self, cid: str) -> str:
        """One leg for conversation `cid`; returns what happened, for logs and tests."""
        try:
            claim = self._claim(cid, "")
            if claim[0] == "admit":  # a batch item resuming: only with a place under its cap
                if not self.batches.admit(str(claim[1]), cid):
                    return "waiting for a place"
                claim = self._claim(cid, "", admitted=True)
        except StorageError as exc:
            if not connection_lost(exc) or self.send_advance_later is None:
                raise
            # the claim may have been carried out, its lease held by a token this leg never
            # learned: the next leg comes once that lease has lapsed, not after a sweep
            log.warning("conversation %s: %s; a leg comes again after the lease", cid, exc)
            self.send_advance_later(cid, self.settings.lease_ttl_ms / 1000)
            return "interrupted"
        if claim[0] != "ok":
            return str(claim[0])
        lease = Lease(
            self.client,
            self.keys,
            cid,
            str(claim[1]),
            self.settings.lease_ttl_ms,
            renew_client=self.renew_client,
        )
        lease.start_renewing()
        released = interrupted = False
        try:
            outcome, released = self._run(cid, lease, claim)
        except LeaseLost:
            log.warning("conversation %s: lease lost; another worker continues", cid)
            return "lost"
        except StorageError as exc:
            if not connection_lost(exc):
                raise
            # Redis went away mid-leg (a cut, a failover), maybe after carrying out the write
            # whose answer was lost: the next leg resumes from what Redis holds, at once
            # rather than after the lease and a sweep
            log.warning("conversation %s: %s; its leg is sent again", cid, exc)
            outcome, interrupted = "interrupted", True
        finally:
            more = self._let_go(cid, lease, released=released)
        if more or interrupted:
            self.send_advance(cid)
        return outcome

    def _let_go(self, cid: str, lease: Lease, *, released: bool) -> bool:
        """Ends the leg's hold on `cid`; True when work remains for another leg at once.

        A release that Redis does not answer (a cut, a cluster failing over) leaves the lease
        to lapse: the next leg is sent for then, as after a claim that was not answered,
        instead of the leg failing and the conversation waiting for a sweep."""
        try:
            more = lease.stop() if released else lease.release()
        except StorageError as exc:
            if not connection_lost(exc) or self.send_advance_later is None:
                raise
            log.warning("conversation %s: %s; a leg comes again after the lease", cid, exc)
            self.send_advance_later(cid, self.settings.lease_ttl_ms / 1000)
            return False
        lease.run_after_release()
        return more

    def _run(self, cid: str, lease: Lease, claim: list[Any]) -> tuple[str, bool]:
        """Runs turns until none is left (the claim let the lease go), a park, or the slice ends."""
        started = time.monotonic()
        while time.monotonic() - started < self.settings.leg_time_slice_s:
            leg = self._leg(cid, claim, lease)
            if leg is None:
                return "parked", False
            registry = self.mcp.registry_for(leg.config, self.registry)
            tracing.ensure(leg)
            with log_context(turn_id=leg.turn_id, trace_id=tracing.trace_id(leg)):
                result = TurnMachine(leg, registry, self.providers, self.limiter).run()
                leg.writer.send_held()  # each way out writes last, so this is never needed
            if result is not LegOutcome.FINISHED:
                return result.value, False
            if leg.writer.released:  # the turn's end found nothing queued and let go
                return "finished", True
            claim = self._claim(cid, lease.token)
            if claim[0] == "idle":
                return "finished", True
            if claim[0] == "lost":
                raise LeaseLost(f"lease of conversation {cid} expired between turns")
        return "yielded", False

    def _claim(self, cid: str, token: str, *, admitted: bool = False) -> list[Any]:
        keys, argv = self._claim_arguments(cid, token, admitted=admitted)
        with storage_errors(f"claiming work of conversation {cid}"):
            return list(_CLAIM(self.client, keys, argv))

    def _claim_arguments(
        self, cid: str, token: str, *, admitted: bool
    ) -> tuple[list[str], list[Any]]:
        """worker/lua/claim.lua's KEYS and ARGV."""
        keys = {
            "conversation": self.keys.conversation(cid),
            "inbox": self.keys.inbox(cid),
            "history_meta": self.keys.history_meta(cid),
            "lease": self.keys.lease(cid),
            "fence": self.keys.fence(cid),
            "events": self.keys.events(cid),
            "policy_rules": self.keys.policy_rules_copy(self.keys.shard_of(cid)),
            "steps": self.keys.steps(cid),
            "compactions": self.keys.compactions(cid),
            "overflow": self.keys.turn_overflow(cid),
        }
        args = {
            "turn_prefix": self.keys.turn(cid, "x")[:-1],
            "token": token,
            "ttl_ms": self.settings.lease_ttl_ms,
            "note_prefix": self.keys.notification_prefix(cid),
            "cid": cid,
            "maxlen": self.settings.stream_maxlen,
            "events_ttl_ms": self.settings.events_ttl_s * 1000,
            "channel": self.keys.live(cid),
            "channel_all": self.keys.live_all(),
            "admitted": "1" if admitted else "",
        }
        return _CLAIM.keys_from(keys), _CLAIM.args_from(args)

    def _leg(self, cid: str, claim: list[Any], lease: Lease) -> Leg | None:
        _, _, tid, conv_flat, turn_flat, appended, queued, nid, note_flat, rules, window = claim
        flags = _as_dict(conv_flat)
        record = self.conversations.parse_get(cid, [flags, queued])
        cancelled = flags.get("cancel_turn") == tid
        parked = self._parked_note(str(nid), _as_dict(note_flat))
        if record.status is ConversationStatus.WAITING_FOR_USER and not self._resumable(
            parked, cancelled
        ):
            return None
        turn = self.conversations.parse_turn(cid, str(tid), _as_dict(turn_flat))
        config = turn.options.apply(record.config)
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
            turn_id=str(tid),
            max_history_size=limit,
            model=config.model,
            usage_scopes=usage_scopes(
                config.agent, config.submitted_by or record.owner, config.batch_id
            ),
        )
        writer.next_position = int(appended)
        leg = Leg(
            settings=self.settings,
            config=config,
            turn=turn,
            lease=lease,
            writer=writer,
            history=self.stores.history(cid, max_history_size=limit),
            tool_calls=ToolLedger(
                self.client,
                self.keys,
                cid,
                ReplicaWait.of(self.settings),
                by=lease.token,
                carrier=writer,
            ),
            notifications=self.notifications,
            batches=self.batches,
            checkpoint=self._checkpoint(turn.fields.get("checkpoint", ""), cid, str(tid)),
            cancelled_at_start=cancelled,
            flags=flags,
            parked_note=None if cancelled else parked,
            policy=self.policies.parse(_as_dict(rules)),
            deltas=self.deltas,
            prices=self.stores.prices,
        )
        if window:  # a turn not yet started: its context window came with the claim
            leg.window_claimed(leg.history.parse_window(*window))
        if config.batch_id:
            writer.on_flush = partial(on_batch_item_flush, self.batches, leg)
        return leg

    def _parked_note(self, nid: str, raw: dict[str, str]) -> Notification | None:
        """The notification a parked turn waits (or waited, if the claim resumed it) on."""
        if not nid:
            return None
        if not raw:
            raise NotFound(f"notification {nid} does not exist")
        return self.notifications.parse(nid, raw)

    def _resumable(self, parked: Notification | None, cancelled: bool) -> bool:
        """A parked turn goes on once its notification is settled, or when it is aborted."""
        if parked is None:
            return True
        if cancelled:
            self.notifications.cancel(parked.id)
            return True
        return parked.status is not NotificationStatus.PENDING

    def _checkpoint(self, raw: str, cid: str, tid: str) -> TurnCheckpoint:
        if not raw:
            return TurnCheckpoint()
        try:
            return TurnCheckpoint.model_validate_json(raw)
        except ValidationError as exc:
            raise CorruptRecord(f"checkpoint of {self.keys.turn(cid, tid)} does not parse") from exc

    def sweep(self) -> Swept:
        """Expiry, the reconciler, and `advance` where work has no worker (see `Sweeper`)."""
        return self.sweeper.sweep()


def _own_connection(client: redis.Redis, settings: Settings) -> redis.Redis:
    """A client of one connection to `client`'s server, for a thread that never waits on a pool
    (on a cluster, a client of its own: one connection per node)."""
    if settings.redis_cluster:
        return connect(settings)
    kwargs = client.connection_pool.connection_kwargs
    pool = redis.ConnectionPool(
        connection_class=client.connection_pool.connection_class, max_connections=1, **kwargs
    )
    return redis.Redis(connection_pool=pool)


def _as_dict(flat: list[Any]) -> dict[str, str]:
    """HGETALL's reply inside a script is a flat list: name, value, name, value..."""
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}


class _Advancer:
    """Lets the batch store send `advance` through the worker's own app."""

    def __init__(self, send_advance: Callable[[str], None]) -> None:
        self.advance = send_advance


class _QueuingAdvancer(_Advancer):
    """Also builds `advance` messages, for a script or pipeline to push in its own write."""

    def __init__(
        self, send_advance: Callable[[str], None], queue_advance: Callable[[str], QueuedTask]
    ) -> None:
        super().__init__(send_advance)
        self.queued_advance = queue_advance
