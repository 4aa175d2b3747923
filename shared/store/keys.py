"""Every Redis key name Signoff uses, and nowhere else is one built.

On one Redis, per-conversation keys carry the conversation id as a hash tag,
``<prefix>:{<cid>}:<name>``. On a Redis Cluster a deployment has a fixed number of state
shards: a conversation belongs to one (by a hash of its id), its keys carry the shard's tag,
``<prefix>:{<tag>}:<cid>:<name>``, and so do the shard's copies of the global structures its
scripts write (``<prefix>:{<tag>}:<name>``), so that each script touches one slot.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

if TYPE_CHECKING:
    from shared.settings import Settings

from shared.errors import InvalidInput

__all__ = ["HISTORY_KEYS", "ID_PATTERN", "KeySpace", "check_id"]

# Every id (conversation, turn, notification, batch): what may sit inside a key and a hash
# tag. Matched whole (`fullmatch`), never with `^...$`: `$` also matches before a final "\n".
# A history's keys by name, in the order `KeySpace.history` lists them: scripts that take
# them declare `history.<name>` keys and read `history_keys.<name>` (shared/store/lua.py).
HISTORY_KEYS = ("steps", "meta", "turn_starts", "compactions", "usage", "overflow")
ID_PATTERN = r"[A-Za-z0-9_.\-]{1,128}"
_ID = re.compile(ID_PATTERN)


def check_id(value: str, what: str = "id") -> str:
    """Rejects ids that could break out of a key or a hash tag."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidInput(f"{what} {value!r} must be 1-128 characters of letters, digits, _ . -")
    return value


@lru_cache(maxsize=4096)
def shard_tag(shard: int, shards: int) -> str:
    """The hash tag of one of `shards` state shards: the first `s<shard>.<n>` whose slot lies
    in the shard's even share of the 16,384, so that the shards spread evenly over the nodes
    of a cluster whose slots are split evenly (as `redis-cli --cluster create` splits them)."""
    low = shard * REDIS_CLUSTER_HASH_SLOTS // shards
    high = (shard + 1) * REDIS_CLUSTER_HASH_SLOTS // shards
    n = 0
    while not low <= key_slot(f"s{shard}.{n}".encode()) < high:
        n += 1
    return f"s{shard}.{n}"


@dataclass(frozen=True)
class KeySpace:
    """Key names under one prefix, for a deployment of `shards` state shards (1 on one Redis)."""

    prefix: str = "signoff"
    shards: int = 1

    @classmethod
    def of(cls, settings: Settings) -> KeySpace:
        """The key space `settings` name: their prefix and state shards."""
        return cls(settings.key_prefix, settings.shards)

    def shard_of(self, cid: str) -> int:
        """The state shard a conversation belongs to (0 on one Redis)."""
        if self.shards == 1:
            return 0
        return zlib.crc32(check_id(cid, "conversation id").encode()) % self.shards

    def shard_for(self, name: str) -> int:
        """The shard that takes what belongs to no conversation (a batch's or a schedule's
        webhook event, say): spread by a hash of its name."""
        return 0 if self.shards == 1 else zlib.crc32(name.encode()) % self.shards

    def all_shards(self) -> range:
        return range(self.shards)

    def every_shard(self, key_of: Callable[[int], str]) -> list[str]:
        """A sharded structure's copies, one per shard (`keys.every_shard(keys.failures)`)."""
        return [key_of(shard) for shard in range(self.shards)]

    def _conv(self, cid: str, name: str) -> str:
        check_id(cid, "conversation id")
        if self.shards == 1:
            return f"{self.prefix}:{{{cid}}}:{name}"
        return f"{self.prefix}:{{{shard_tag(self.shard_of(cid), self.shards)}}}:{cid}:{name}"

    def _sharded(self, shard: int, name: str, single: str = "") -> str:
        """A global structure's copy in one shard; on one Redis, the name it has always had
        (`single` where that carries a hash tag of its own)."""
        if self.shards == 1:
            return f"{self.prefix}:{single or name}"
        if not 0 <= shard < self.shards:
            raise ValueError(f"shard {shard} is not one of {self.shards}")
        return f"{self.prefix}:{{{shard_tag(shard, self.shards)}}}:{name}"

    # History and usage (one script writes all of these together)
    def steps(self, cid: str) -> str:
        """LIST of retained steps as JSON, oldest first."""
        return self._conv(cid, "steps")

    def history_meta(self, cid: str) -> str:
        """HASH: trimmed count, appended count, last response, last structured output."""
        return self._conv(cid, "hmeta")

    def turn_starts(self, cid: str) -> str:
        """LIST of absolute step positions where turns start."""
        return self._conv(cid, "turns")

    def compactions(self, cid: str) -> str:
        """LIST of absolute step positions where compaction happened."""
        return self._conv(cid, "compactions")

    def usage(self, cid: str) -> str:
        """HASH of cumulative counters and ``turn:``-prefixed counters of the last turn."""
        return self._conv(cid, "usage")

    def turn_overflow(self, cid: str) -> str:
        """LIST of the latest turn's steps that trimming removed, so its response has them all."""
        return self._conv(cid, "turn_overflow")

    def history(self, cid: str) -> list[str]:
        """The keys above, in `HISTORY_KEYS` order."""
        return list(self.history_by_name(cid).values())

    def history_by_name(self, cid: str) -> dict[str, str]:
        """The keys above by their `HISTORY_KEYS` names."""
        keys = (
            self.steps(cid),
            self.history_meta(cid),
            self.turn_starts(cid),
            self.compactions(cid),
            self.usage(cid),
            self.turn_overflow(cid),
        )
        return dict(zip(HISTORY_KEYS, keys, strict=True))

    # Conversation state
    def conversation(self, cid: str) -> str:
        """HASH: configuration, status, closed flag."""
        return self._conv(cid, "conv")

    def inbox(self, cid: str) -> str:
        """LIST of queued turn ids."""
        return self._conv(cid, "inbox")

    def turn(self, cid: str, turn_id: str) -> str:
        """HASH of one turn: prompt, status, counters, checkpoint."""
        return self._conv(cid, f"turn:{check_id(turn_id, 'turn id')}")

    def lease(self, cid: str) -> str:
        return self._conv(cid, "lease")

    def fence(self, cid: str) -> str:
        """Counter handing out fencing tokens for the lease."""
        return self._conv(cid, "fence")

    def tool_results(self, cid: str) -> str:
        """HASH of tool results by call id, recorded before they are used."""
        return self._conv(cid, "toolresults")

    def events(self, cid: str) -> str:
        """STREAM of this conversation's events: the source of truth for replay."""
        return self._conv(cid, "events")

    def turn_ids(self, cid: str) -> str:
        """SET of the ids of every turn submitted to it, so its turn hashes can be found."""
        return self._conv(cid, "turn_ids")

    def notification_ids(self, cid: str) -> str:
        """SET of the ids of every notification it filed, so they can be found."""
        return self._conv(cid, "notification_ids")

    def conversation_prefix(self, cid: str) -> str:
        """What every key of one conversation starts with (its hash tag included)."""
        return self._conv(cid, "")

    def live(self, cid: str) -> str:
        """Pub/sub channel of this conversation's live events."""
        return self._conv(cid, "live")

    def _own_slot(self, tag: str, name: str, single: str = "") -> str:
        """A global structure kept whole on one slot (by `tag`) on a cluster; on one Redis,
        the name it has always had."""
        if self.shards == 1:
            return f"{self.prefix}:{single or name}"
        return f"{self.prefix}:{{{tag}}}:{name}"

    def _webhook(self, delivery_id: str, name: str) -> str:
        """A webhook delivery's key: its own tag on one Redis, the deliveries' slot on a
        cluster (a delivery's log and the pending index change in one transaction)."""
        did = check_id(delivery_id, "delivery id")
        return self._own_slot("webhooks", f"{name}:{did}", f"webhook:{{{did}}}:{name}")

    def _schedule(self, name: str, what: str) -> str:
        """A schedule's key: its own tag on one Redis, the schedules' slot on a cluster (a
        fire changes its state and the due and claimed sets in one transaction)."""
        check_id(name, "schedule name")
        return self._own_slot("schedules", f"{what}:{name}", f"schedule:{{{name}}}:{what}")

    # Global
    def conversations(self, shard: int) -> str:
        """ZSET of a shard's conversation ids by creation time."""
        return self._sharded(shard, "conversations")

    def archived(self, shard: int) -> str:
        """ZSET of a shard's conversations archived out of Redis, by when (shared/archive/)."""
        return self._sharded(shard, "archived")

    def retention(self) -> str:
        """HASH: rule (`global`, `agent:<name>`, `batch:<id>`, `label:<label>`) -> seconds a
        finished conversation stays in Redis before it is archived."""
        return f"{self.prefix}:retention"

    def failures(self, shard: int) -> str:
        """ZSET of a shard's conversations by when a turn of theirs last failed (the newest
        kept)."""
        return self._sharded(shard, "failures")

    def active(self, shard: int) -> str:
        """ZSET of a shard's conversations with work queued or running, for the sweeper."""
        return self._sharded(shard, "active")

    def live_all(self) -> str:
        """Pub/sub channel carrying every conversation's events."""
        return f"{self.prefix}:live"

    def notification(self, nid: str) -> str:
        """HASH of one notification, in its conversation's slot (ids are ``<cid>.<suffix>``)."""
        cid, _, suffix = check_id(nid, "notification id").rpartition(".")
        if not cid or not suffix:
            raise InvalidInput(
                f"notification id {nid!r} is not of the form <conversation>.<suffix>"
            )
        return self._conv(cid, f"notification:{suffix}")

    def notification_prefix(self, cid: str) -> str:
        """What a notification key of `cid` is before its suffix, for scripts that read the
        one a conversation is parked on (`parked_on` holds ``<cid>.<suffix>``)."""
        return self._conv(cid, "notification:")

    def conversation_notifications(self, cid: str) -> str:
        """STREAM delivering this conversation's notifications (consumer groups read it)."""
        return self._conv(cid, "notifications")

    # The inbox indexes share one hash tag, so they can be intersected (in Cluster too).

    def notifications_pending(self) -> str:
        """ZSET of pending notification ids by creation time: the inbox, oldest first."""
        return f"{self.prefix}:{{notifications}}:pending"

    def notifications_pending_by(self, facet: str, value: str) -> str:
        """ZSET of pending ids by creation time for one tool, batch or conversation."""
        return f"{self.prefix}:{{notifications}}:pending:{facet}:{value}"

    def notifications_pending_matching(self, digest: str) -> str:
        """ZSET, short-lived: the intersection of several facet indexes for one inbox query."""
        return f"{self.prefix}:{{notifications}}:matching:{digest}"

    def notification_deadlines(self) -> str:
        """ZSET of pending ids by expiry time, for the sweeper."""
        return f"{self.prefix}:{{notifications}}:deadlines"

    def notifications_all(self) -> str:
        """ZSET of every notification id by creation time."""
        return f"{self.prefix}:{{notifications}}:all"

    def notification_stream(self, shard: int) -> str:
        """STREAM delivering the notifications of a shard's conversations."""
        return self._sharded(shard, "notifications:stream")

    # Webhooks: the outbox and the endpoints share a hash tag (one script reads both).

    def webhook_endpoints(self) -> str:
        """HASH: endpoint id -> the endpoint (JSON, with its secret)."""
        return f"{self.prefix}:{{webhooks}}:endpoints"

    def webhook_endpoints_copy(self, shard: int) -> str:
        """The endpoints' copy a shard's flushes read (the endpoints themselves on one Redis)."""
        return self._sharded(shard, "webhooks:endpoints", "{webhooks}:endpoints")

    def webhook_outbox(self, shard: int) -> str:
        """STREAM of events waiting to become deliveries (the dispatcher's consumer group)."""
        return self._sharded(shard, "webhooks:outbox", "{webhooks}:outbox")

    def webhook_deliveries(self) -> str:
        """ZSET of delivery ids by creation time: the bounded delivery log."""
        return self._own_slot("webhooks", "deliveries", "webhooks:deliveries")

    def webhook_delivery(self, delivery_id: str) -> str:
        """HASH: one delivery (its payload as `doc`), status, attempts, next attempt."""
        return self._webhook(delivery_id, "delivery")

    def webhook_attempts(self, delivery_id: str) -> str:
        """LIST of one delivery's attempts (JSON), oldest first."""
        return self._webhook(delivery_id, "attempts")

    def webhook_sending(self, delivery_id: str) -> str:
        """STRING held (with a TTL) while one attempt of a delivery is in flight."""
        return self._webhook(delivery_id, "sending")

    def webhook_pending(self) -> str:
        """ZSET: pending delivery id -> when its next attempt is due (Unix time); swept."""
        return self._own_slot("webhooks", "pending", "webhooks:pending")

    def triggers(self) -> str:
        """HASH: trigger name -> the trigger (JSON, with its secret)."""
        return self._own_slot("triggers", "triggers")

    def trigger_event(self, name: str, digest: str) -> str:
        """STRING: the conversation one trigger event started (its id's digest), for replays."""
        check_id(name, "trigger name")
        return self._own_slot(
            "triggers", f"event:{name}:{digest}", f"trigger:{{{name}}}:event:{digest}"
        )

    def audit(self) -> str:
        """STREAM of resolutions: who, when, what, arguments before and after."""
        return f"{self.prefix}:audit"

    def routes(self) -> str:
        """HASH: route name -> the route (JSON): which approvals go where."""
        return f"{self.prefix}:routes"

    def route_sent(self, nid: str, recipient: str) -> str:
        """STRING (expiring): a notification was sent to a route's recipient (exactly once)."""
        return f"{self.prefix}:route-sent:{check_id(nid, 'notification id')}:{recipient}"

    def route_escalations(self) -> str:
        """ZSET: "<notification id>|<route>" -> when to escalate it there (claimed by ZREM)."""
        return f"{self.prefix}:route-escalations"

    def route_log(self) -> str:
        """STREAM (capped): every attempt to send an approval email, with its outcome."""
        return f"{self.prefix}:route-log"

    def slack_messages(self, nid: str) -> str:
        """HASH: channel -> the ts of the Slack message that asks about a notification."""
        return f"{self.prefix}:slack-messages:{check_id(nid, 'notification id')}"

    def approval_link_used(self, nonce: str) -> str:
        """STRING (expiring with the link): a signed approval link's nonce, once it was used."""
        return f"{self.prefix}:approval-link-used:{check_id(nonce, 'link nonce')}"

    def reconcile_cursors(self) -> str:
        """HASH: index walked by the reconciler -> where its next page starts ("<score> <id>")."""
        return f"{self.prefix}:reconcile:cursors"

    def reconcile_lock(self) -> str:
        """STRING: held while one sweep reconciles, so two never repair the same entry."""
        return f"{self.prefix}:reconcile:lock"

    def budget(self, kind: str, name: str) -> str:
        """HASH of an agent's or owner's daily budget: `limit:tokens`, `limit:micros` (in
        its days' slot on a cluster: a reservation reads the one and writes the other)."""
        if self.shards == 1:
            return f"{self.prefix}:budget:{kind}:{name}"
        return f"{self.prefix}:{{budget:{kind}:{name}}}"

    def budget_day(self, kind: str, name: str, day: str) -> str:
        """HASH of what an agent or owner spent and has reserved on one UTC day."""
        return f"{self.budget(kind, name)}:day:{day}"

    def prices(self) -> str:
        """HASH of model prices (JSON `Price`) by "<provider>/<model>"."""
        return self._own_slot("prices", "prices")

    def prices_copy(self, shard: int) -> str:
        """The prices' copy a shard's reservations read (the prices themselves on one Redis)."""
        return self._sharded(shard, "prices")

    def usage_by_day(self, day: str, shard: int) -> str:
        """HASH of a shard's token totals by model for one UTC day (YYYY-MM-DD)."""
        return self._sharded(shard, f"usage:day:{day}")

    def _batch(self, bid: str, name: str) -> str:
        return f"{self.prefix}:batch:{{{check_id(bid, 'batch id')}}}:{name}"

    def batch(self, bid: str) -> str:
        """HASH: config, status, total, counts (`count:<state>`), usage totals, sticky allows."""
        return self._batch(bid, "meta")

    def batch_states(self, bid: str) -> str:
        """HASH: conversation id -> the item's state (queued, running, waiting, done, ...)."""
        return self._batch(bid, "states")

    def batch_queue(self, bid: str) -> str:
        """LIST of conversation ids not yet dispatched (the concurrency cap holds them)."""
        return self._batch(bid, "queue")

    def batch_releasing(self, bid: str) -> str:
        """SET of conversation ids dispatched whose hold is not yet known to be released."""
        return self._batch(bid, "releasing")

    def batch_resuming(self, bid: str) -> str:
        """LIST of waiting items whose approval is settled, waiting for a place under the cap."""
        return self._batch(bid, "resuming")

    def batch_items(self, bid: str) -> str:
        """LIST of items in input order: JSON with the line, its id and its conversation."""
        return self._batch(bid, "items")

    def batch_ids(self, bid: str) -> str:
        """HASH: item id -> conversation id, so a resubmitted item is recognised."""
        return self._batch(bid, "ids")

    def batch_retrying(self, bid: str) -> str:
        """STRING, expiring: held while a retry queues items again, so two never overlap."""
        return self._batch(bid, "retrying")

    def users(self) -> str:
        """HASH: username -> operator record (password hash)."""
        return f"{self.prefix}:users"

    def tokens(self) -> str:
        """HASH: SHA-256 of an API token -> token record (name, role)."""
        return f"{self.prefix}:tokens"

    def login_attempts(self, client: str) -> str:
        """ZSET: times (ms) of one client address's sign-in attempts in the last minute."""
        return f"{self.prefix}:login-window:{client}"

    def login_attempts_as(self, username: str) -> str:
        """ZSET: times (ms) of attempts naming one username in the last minute, any address."""
        return f"{self.prefix}:login-window-user:{username}"

    def session(self, digest: str) -> str:
        """STRING: one web session (JSON), by the SHA-256 of its id; expires with the session."""
        return f"{self.prefix}:session:{digest}"

    def user_sessions(self, username: str) -> str:
        """SET of one operator's session digests, so all of them can be ended at once."""
        return f"{self.prefix}:sessions:{username}"

    def tokens_used(self) -> str:
        """HASH: SHA-256 of an API token -> when it was last used (noted once a minute at most)."""
        return f"{self.prefix}:tokens:used"

    def celery_queue(self, queue: str) -> str:
        """LIST: the broker's messages waiting in `queue` (kombu's key, under Celery's prefix)."""
        return f"{self.prefix}:celery:{queue}"

    # The task outbox (a broker apart from this Redis): one hash tag, the relay's scripts
    # touch one slot.

    def task_outbox(self, shard: int) -> str:
        """LIST of tasks a shard's state writes asked for, waiting for the relay (LPUSH;
        oldest right)."""
        return self._sharded(shard, "tasks:outbox", "{tasks}:outbox")

    def task_outbox_relaying(self, shard: int) -> str:
        """LIST of outbox entries the relay took and has not yet seen published, oldest first."""
        return self._sharded(shard, "tasks:relaying", "{tasks}:relaying")

    def task_relay_lease(self, shard: int) -> str:
        """STRING: the token of the one relay publishing a shard's outbox (PX)."""
        return self._sharded(shard, "tasks:relay", "{tasks}:relay")

    def heartbeat(self, process: str) -> str:
        """STRING: when `process` (e.g. `beat`) last showed it is alive; expires when it stops."""
        return f"{self.prefix}:heartbeat:{process}"

    def batches(self) -> str:
        """ZSET of batch ids by creation time."""
        return f"{self.prefix}:batches"

    # The operator's tool policy
    def policy_rules(self) -> str:
        """HASH: ``<tool>|<scope>`` -> auto, ask or deny; the operator's tool policy (in its
        log's slot: a change writes both in one transaction)."""
        return self._own_slot("policy", "rules", "policy:rules")

    def policy_rules_copy(self, shard: int) -> str:
        """The rules' copy a shard's claims read (the rules themselves on one Redis)."""
        return self._sharded(shard, "policy:rules")

    def policy_titles(self) -> str:
        """HASH: tool -> JSON list of the argument names that title its requests (at most two)."""
        return self._own_slot("policy", "titles", "policy:titles")

    def policy_log(self) -> str:
        """STREAM of policy changes: who, when, which rule, before and after."""
        return self._own_slot("policy", "log", "policy:log")

    def tool_catalog(self) -> str:
        """HASH: tool name -> JSON (description, built-in default policy), written by workers."""
        return self._own_slot("mcp", "tools", "tools")  # MCP servers change it with theirs

    # MCP tool servers
    def mcp_servers(self) -> str:
        """HASH: server name -> its record (JSON: how to reach it, state, listed tools)."""
        return self._own_slot("mcp", "servers", "mcp:servers")

    def mcp_secrets(self) -> str:
        """HASH: server name -> its environment and header values (JSON), never shown."""
        return self._own_slot("mcp", "secrets", "mcp:secrets")

    # Named agents and their schedules
    def agents(self) -> str:
        """HASH: agent name -> its latest version."""
        return self._own_slot("agents", "agents")

    def agent_versions(self, name: str) -> str:
        """HASH: version -> that version of one agent (JSON)."""
        check_id(name, "agent name")
        return self._own_slot("agents", f"versions:{name}", f"agent:{{{name}}}:versions")

    def schedules(self) -> str:
        """HASH: schedule name -> the schedule (JSON) as its operator wrote it."""
        return self._own_slot("schedules", "schedules")

    def schedule_state(self, name: str) -> str:
        """HASH of one schedule's runs: paused, last fire, its conversation, counts."""
        return self._schedule(name, "state")

    def schedule_runs(self, name: str) -> str:
        """STREAM of one schedule's fires: the slot, when it fired, what happened (capped)."""
        return self._schedule(name, "runs")

    def schedule_queue(self, name: str) -> str:
        """LIST of the due times (ms) of fires waiting for the schedule's running conversation."""
        return self._schedule(name, "queue")

    def schedules_waiting(self) -> str:
        """SET of schedules with fires waiting (`overlap: queue`)."""
        return self._own_slot("schedules", "waiting", "schedules:waiting")

    def schedules_due(self) -> str:
        """ZSET: schedule name -> its next fire time; claiming a slot moves the score on."""
        return self._own_slot("schedules", "due", "schedules:due")

    def schedules_claimed(self) -> str:
        """ZSET: `<due ms>:<name>` of each slot claimed but not yet fired -> claim time (ms)."""
        return self._own_slot("schedules", "claimed", "schedules:claimed")

    # A provider's rate limits: every key of one provider shares its hash tag, so the grant
    # script runs in one slot. `scope` is the model a limit is for, or `*` for the provider's.
    def _rate(self, provider: str, scope: str, name: str) -> str:
        return f"{self.prefix}:ratelimit:{{{provider}}}:{scope}:{name}"

    def rate_bucket(self, provider: str, scope: str, unit: str) -> str:
        """HASH of one token bucket (`requests` or `tokens`) shared by every worker."""
        return self._rate(provider, scope, unit)

    def rate_queue(self, provider: str, scope: str, cls: str) -> str:
        """ZSET of the calls of one priority class waiting for a limit: waiter -> its place."""
        return self._rate(provider, scope, f"wait:{cls}")

    def rate_rounds(self, provider: str, scope: str) -> str:
        """HASH: batch id -> the last round its waiters were given; `:served` -> the round
        served last (batches take turns)."""
        return self._rate(provider, scope, "rounds")

    def rate_amounts(self, provider: str, scope: str) -> str:
        """HASH: waiter -> the tokens its call asks for."""
        return self._rate(provider, scope, "amounts")

    def rate_seen(self, provider: str, scope: str) -> str:
        """ZSET: waiter -> when it last asked (ms); the silent ones are dropped."""
        return self._rate(provider, scope, "seen")

    def rate_pause(self, provider: str) -> str:
        """STRING set after the provider answered 429, expiring when its Retry-After ends."""
        return f"{self.prefix}:ratelimit:{{{provider}}}:paused"

    def rate_pause_copy(self, provider: str, shard: int) -> str:
        """The pause's copy a shard's reservations read (the pause itself on one Redis)."""
        return self._sharded(
            shard, f"ratelimit:{provider}:paused", f"ratelimit:{{{provider}}}:paused"
        )
