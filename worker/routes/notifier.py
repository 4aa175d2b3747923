"""The route notifier: reads every new request from the global notification stream (its own
consumer group) and queues one email per matching route's recipient (and a Slack post).

Each (request, recipient) is queued once: a marker set with SET NX before queueing, so a
reclaimed entry (its notifier died before acknowledging) or two routes naming one address
send nothing twice. A route with an escalation schedules "<request>|<route>" in a ZSET, due
after its delay; every notifier polls what is due and claims each entry with ZREM, which
only one of them wins, so an escalation is sent once however many workers poll. Runs in a
thread of every worker process that delivers webhooks.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from shared.errors import NotFound, SignoffError
from shared.models.notifications import NotificationKind, NotificationStatus
from shared.models.routes import EmailRecipient, Route
from shared.settings import Settings
from shared.store.conversations import ConversationStore
from shared.store.keys import KeySpace
from shared.store.notifications import NotificationStore
from shared.store.routes import RouteStore
from shared.store.stream_groups import ensure_group
from worker.loop_step import LoopStep

__all__ = ["GROUP", "RouteNotifier", "RouteNotifierStep", "recipient_id"]

log = logging.getLogger(__name__)

GROUP = "routes"
BLOCK_MS = 1_000
SHARDS_PAUSE_MS = 100  # the longest wait between two rounds over several shards' streams
BATCH = 100
RECLAIM_IDLE_MS = 30_000
# Escalations are looked for at most this often (an idle step waits this long anyway): a busy
# stream made every step poll them, a round trip per turn's delivery.
ESCALATION_POLL_S = 1.0
# After a step that handled fewer entries than a batch, the next one waits this long, so
# that under load each read takes many entries, not one per turn (a read and an ack each
# turn: two of its thirteen round trips); a request's email goes at most this late.
GATHER_S = 0.1
_ERROR_PAUSE_S = 1.0
_SENT_TTL_S = 30 * 86_400

# Queues an email: (notification id, route name, recipient).
SendEmail = Callable[[str, str, EmailRecipient], None]
# Queues a Slack post: (notification id, route name, channel).
SendSlack = Callable[[str, str, str], None]


def recipient_id(recipient: EmailRecipient) -> str:
    """Names one recipient in keys: the approver and a digest of the address."""
    digest = hashlib.sha256(recipient.address.lower().encode()).hexdigest()[:16]
    return f"{recipient.approver}:{digest}"


class RouteNotifier:
    """Matches each new request to the routes and queues their emails."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        settings: Settings,
        send: SendEmail,
        send_slack: SendSlack | None = None,
        update_slack: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.routes = RouteStore(client, keys)
        self.notifications = NotificationStore(client, keys, settings)
        self.conversations = ConversationStore(client, keys, settings)
        self.send = send
        self.send_slack = send_slack
        self.update_slack = update_slack
        self.consumer = f"{socket.gethostname()}:{os.getpid()}"
        self._group_ready = False
        self._escalations_polled = float("-inf")  # monotonic

    def run(self, stop: threading.Event) -> None:
        """Notifies until `stop` is set; a Redis failure pauses it, never ends it."""
        rounds = 0
        while not stop.is_set():
            try:
                handled = self.step(reclaim=rounds % 30 == 0)
                rounds += 1
                if 0 < handled < BATCH:
                    stop.wait(GATHER_S)
            except (redis.RedisError, SignoffError) as exc:
                log.warning("route notifier: %s", exc)
                self._group_ready = False
                stop.wait(_ERROR_PAUSE_S)

    def step(self, *, reclaim: bool = False, block_ms: int = BLOCK_MS) -> int:
        """Handles what is waiting (and, with `reclaim`, what a dead notifier left), after the
        escalations that are due (at most once per `ESCALATION_POLL_S`).

        A step's entries are acknowledged together once handled: one that is read again
        (its notifier died first) queues nothing twice (the markers of `_send`)."""
        now = time.monotonic()
        if now - self._escalations_polled >= ESCALATION_POLL_S:
            self._escalations_polled = now
            self.escalate_due()
        streams, audit = self.keys.every_shard(self.keys.notification_stream), self.keys.audit()
        self._ensure_group([*streams, audit])
        entries: list[tuple[str, str, dict[str, str]]] = []  # (stream, entry id, fields)
        for stream in streams if reclaim else []:
            reply: Any = self.client.xautoclaim(
                stream, GROUP, self.consumer, RECLAIM_IDLE_MS, count=BATCH
            )
            entries += [(stream, eid, fields) for eid, fields in reply[1] if fields]
        settled: list[tuple[str, dict[str, str]]] = []
        for name, read in self._read([*streams, audit], block_ms):
            if name == audit:
                settled += read
            else:
                entries += [(name, eid, fields) for eid, fields in read]
        requests = [f for *_, f in entries if f.get("kind") == NotificationKind.INTERACTION.value]
        routes = self.routes.all() if requests else []  # passive entries need no route
        for fields in requests if routes else []:
            self._notify(fields.get("notification_id", ""), routes)
        for stream in streams:
            done = [entry_id for name, entry_id, _ in entries if name == stream]
            if done:
                self.client.xack(stream, GROUP, *done)
        for _, fields in settled:  # a decision anywhere: its Slack messages say so
            nid = fields.get("notification_id", "")
            if self.update_slack is not None and nid and self._posted(nid):
                self.update_slack(nid)
        if settled:
            self.client.xack(audit, GROUP, *(entry_id for entry_id, _ in settled))
        return len(entries) + len(settled)

    def _read(self, streams: list[str], block_ms: int) -> list[tuple[str, Any]]:
        """New entries of `streams`: in one blocking read on one Redis; on a cluster (where a
        read may not span slots) one read each without blocking, and a pause when none
        found anything."""
        if self.keys.shards == 1:
            found: Any = self.client.xreadgroup(
                GROUP, self.consumer, dict.fromkeys(streams, ">"), count=BATCH, block=block_ms
            )
            return [(str(name), read) for name, read in found or []]
        reads = []
        for stream in streams:
            found = self.client.xreadgroup(GROUP, self.consumer, {stream: ">"}, count=BATCH)
            reads += [(str(name), read) for name, read in found or []]
        if not reads and block_ms:
            time.sleep(min(block_ms, SHARDS_PAUSE_MS) / 1000)
        return reads

    def _posted(self, nid: str) -> bool:
        try:
            return bool(self.client.exists(self.keys.slack_messages(nid)))
        except SignoffError:  # an ill-formed id in the audit log: nothing was posted for it
            return False

    def _notify(self, nid: str, routes: list[Route]) -> None:
        try:
            note = self.notifications.get(nid)
        except NotFound:
            return
        try:
            config = self.conversations.get(note.conversation_id).config
            labels, agent = config.labels, config.agent
        except NotFound:  # gone since: matched on what the request itself says
            labels, agent = [], None
        for route in routes:
            facets = {"batch_id": note.batch_id, "agent": agent}
            if not route.matches(tool=note.tool_name, labels=labels, **facets):
                continue
            if route.escalate_to is not None and route.escalate_after_s is not None:
                due = time.time() + route.escalate_after_s
                member = f"{nid}|{route.escalate_to}"
                self.client.zadd(self.keys.route_escalations(), {member: due}, nx=True)
            self._send(nid, route)

    def _send(self, nid: str, route: Route) -> None:
        """Queues the route's emails and post, each once per request and recipient."""
        for recipient in route.email:
            marker = self.keys.route_sent(nid, recipient_id(recipient))
            if self.client.set(marker, route.name, nx=True, ex=_SENT_TTL_S):
                self.send(nid, route.name, recipient)
        channel = route.slack_channel
        if channel and self.send_slack is not None:
            marker = self.keys.route_sent(nid, f"slack:{channel}")
            if self.client.set(marker, route.name, nx=True, ex=_SENT_TTL_S):
                self.send_slack(nid, route.name, channel)

    def escalate_due(self, now: float | None = None) -> list[str]:
        """Sends each due escalation this notifier claims (ZREM: one claimant wins) to its
        route, if the request still waits; returns the entries it claimed."""
        key = self.keys.route_escalations()
        due = self.client.zrangebyscore(key, "-inf", time.time() if now is None else now, 0, 100)
        claimed = [str(m) for m in due if self.client.zrem(key, str(m))]
        if not claimed:
            return []
        routes = {route.name: route for route in self.routes.all()}
        for member in claimed:
            nid, _, name = member.rpartition("|")
            route = routes.get(name)
            try:
                pending = self.notifications.get(nid).status is NotificationStatus.PENDING
            except NotFound:
                pending = False
            if route is not None and pending:
                log.info("escalating %s to route %s", nid, name)
                self._send(nid, route)
        return claimed

    def _ensure_group(self, streams: list[str]) -> None:
        if self._group_ready:
            return
        for key in streams:
            ensure_group(self.client, key, GROUP, start="$")
        self._group_ready = True


class RouteNotifierStep(LoopStep):
    """Runs a `RouteNotifier` in a thread for as long as the Celery worker runs."""

    thread_name = "route-notifier"

    def make_loop(self, app: Any) -> RouteNotifier:
        notifier: RouteNotifier = app.signoff_route_notifier()
        return notifier
