"""A broker channel's fetch that takes a message and records its delivery in one round trip.

kombu's Redis transport takes a message with BRPOP, then records it as unacknowledged
(the index and hash its visibility timeout restores from) in a second round trip: on the
throughput workload, a twentieth of the worker's CPU per turn went to that record. While
messages are waiting, the channel takes the next one with `fetch.lua`, which records it
in the same script; when the queues are found empty it blocks on BRPOP again, as kombu
does, and the message BRPOP brings is recorded kombu's way.

The record is made by Redis before the reply leaves it, so a connection that drops with
the reply in flight leaves the message recorded (restored after the visibility timeout),
where a BRPOP reply lost that way lost the message.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import redis
from kombu.transport.redis import Empty
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

from shared.store.lua import LuaScript
from worker.broker_acks import PendingAcks

log = logging.getLogger(__name__)

__all__ = ["RecordingFetch"]

_FETCH = LuaScript(
    "worker",
    "fetch.lua",
    keys=("list", "unacked_index", "unacked"),
    args=("now", "acks"),
    decode=("acks",),
    each=True,
)


class RecordingFetch:
    """Mixin of a kombu Redis channel: fetches by script while its queues hold messages.

    The channel's QoS asks `recorded` before it records a delivery itself.
    """

    _by_script = False  # the last fetch found a message: the next likely finds one too
    _script_sent = False  # the command in flight on the fetch connection is the script
    _recorded: set[str] | None = None  # deliveries the script recorded, until QoS asks
    _pending_acks: PendingAcks | None = None
    _carried: list[str] = []  # acknowledged tags the script in flight removes
    _send_body = True  # the script's text, not its digest, goes with the next fetch

    # kombu's channel, which this is mixed into
    client: Any
    sep: str
    global_keyprefix: str
    priority_steps: list[int]
    unacked_key: str
    unacked_index_key: str
    active_queues: Any
    connection: Any
    _in_poll: Any
    _brpop_sent_at: Any
    _queue_cycle: Any

    @property
    def acks(self) -> PendingAcks:
        """The channel's acknowledged deliveries whose records are not removed yet."""
        if self._pending_acks is None:
            self._pending_acks = PendingAcks(self)
        return self._pending_acks

    def flush_acks(self) -> None:
        """Removes every acknowledged delivery's record now (a channel closing)."""
        self._give_back_carried()
        self.acks.flush()

    def _give_back_carried(self) -> None:
        if self._carried:
            self.acks.give_back(self._carried)
            self._carried = []

    def recorded(self, delivery_tag: str) -> bool:
        """Whether the fetch recorded this delivery already (once: the record is taken)."""
        if self._recorded is not None and delivery_tag in self._recorded:
            self._recorded.discard(delivery_tag)
            return True
        return False

    def _brpop_start(self, timeout: Any = None) -> None:
        self._script_sent = False
        self._give_back_carried()  # a script whose reply was never read (a dropped connection)
        if not self._by_script:
            super()._brpop_start(timeout)  # type: ignore[misc]
            return
        queues = self._queue_cycle.consume(len(self.active_queues))
        if not queues:
            return
        prefix = self.global_keyprefix or ""
        index, unacked = prefix + self.unacked_index_key, prefix + self.unacked_key
        keys = []
        for pri in self.priority_steps:  # BRPOP's order: every queue at a priority, then the next
            for queue in queues:
                keys += [prefix + self._q_for_pri(queue, pri), index, unacked]  # type: ignore[attr-defined]
        self._in_poll = self.client.connection
        self._brpop_sent_at = time.monotonic()
        self._carried = self.acks.take()
        self._script_sent = True
        # by digest; the body once Redis says it lacks the script (a restart, a flush)
        script = ("EVAL", _FETCH.body) if self._send_body else ("EVALSHA", _FETCH.sha)
        self.client.connection.send_command(
            *script, len(keys), *keys, time.time(), json.dumps(self._carried)
        )

    def _brpop_read(self, **options: Any) -> bool:
        if not self._script_sent:
            found = False
            try:
                found = super()._brpop_read(**options)  # type: ignore[misc]
                return found
            finally:
                self._by_script = found
        self._script_sent = False
        try:
            try:
                reply = self.client.parse_response(self.client.connection, "EVAL", **options)
            except self.connection_errors:  # type: ignore[attr-defined]
                self.client.connection.disconnect()  # as kombu: the next fetch reconnects
                raise
            except redis.exceptions.NoScriptError:  # it did not run: nothing taken
                self._send_body = True
                self._give_back_carried()
                raise Empty() from None
            except redis.ResponseError:
                self._by_script = False
                self._give_back_carried()
                log.warning("fetching by script failed; fetching with BRPOP", exc_info=True)
                raise Empty() from None
            self._send_body = False
            self._carried = []  # the script ran: their records are gone
            if not reply:
                self._by_script = False
                raise Empty()
            name = bytes_to_str(reply[0])[len(self.global_keyprefix or "") :]
            queue = name.rsplit(self.sep, 1)[0]
            message = loads(bytes_to_str(reply[1]))
            if len(reply) == 2:
                if self._recorded is None:
                    self._recorded = set()
                self._recorded.add(message["properties"]["delivery_tag"])
            self._queue_cycle.rotate(queue)
            self.connection._deliver(message, queue)
            return True
        finally:
            self._in_poll = None
            flush_reauth = getattr(self, "_flush_brpop_reauth", None)
            if flush_reauth is not None:
                flush_reauth()
