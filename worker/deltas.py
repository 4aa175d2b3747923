"""Streamed deltas, written per tick: one round trip per flush window for every conversation.

A worker process may stream hundreds of model calls at once, each producing tokens
faster or slower than the flush window. Each model call's `StepStreamer` buffers its
deltas and enrols with the process's `DeltaFlusher`; once a window, the flusher's
thread takes every enrolled buffer and writes them all with one script call
(`worker/lua/deltas.lua`) on its own connection. Round trips per second are bounded by
the window, not by conversations times tokens.

Each entry is fenced on its own inside the script: a conversation whose lease was taken
over gets its deltas refused and is told so, the others are written. The script also
reports, per entry, whether abort was asked for the entry's turn. A buffer is taken by
one tick or by its leg (after the model call ended), never both, and a leg's own flush
waits for a tick carrying its deltas to return first, so a conversation's events stay
ordered and are written once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import redis

from shared.errors import StorageError
from shared.settings import Settings
from shared.store.connection import storage_errors
from shared.store.emit import EMIT_LUA
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript
from worker.process_thread import ProcessThread

__all__ = ["DeltaEntry", "DeltaFlusher", "DeltaSource", "TickReply", "tick_argument"]

_DELTAS = LuaScript(
    "worker",
    "deltas.lua",
    keys=["lease", "conversation", "events"],  # for each entry, in order
    each=True,
    args=["batch"],
    decode=["batch"],
    uses=[EMIT_LUA],
)


@dataclass(frozen=True, slots=True)
class DeltaEntry:
    """One conversation's deltas in a tick: written only under its fencing token.

    This, the tick's argument and each reply are plain data rather than models: a tick
    makes one of each for every conversation streaming, at a model's token pace."""

    token: str
    turn_id: str
    channel: str  # the conversation's live channel
    events: list[str]  # encoded events, in order


@dataclass(frozen=True, slots=True)
class TickReply:
    """What the tick script said of one entry."""

    fenced: bool = False
    cancel_requested: bool = False


def tick_argument(maxlen: str, ttl_ms: str, channel: str, entries: list[DeltaEntry]) -> str:
    """The tick script's one argument (JSON); its KEYS name each entry's lease, conversation
    and stream, in the entries' order. `channel`: the global live channel."""
    return _ENCODE(
        {
            "maxlen": maxlen,
            "ttl_ms": ttl_ms,
            "channel": channel,
            "entries": [
                {"token": e.token, "turn_id": e.turn_id, "channel": e.channel, "events": e.events}
                for e in entries
            ],
        }
    )


# compact, and UTF-8 left as it is (the buffers hold no lone surrogate: worker/streaming.py)
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class DeltaSource(Protocol):
    """A model call's buffer of deltas, as the flusher sees it (a `StepStreamer`)."""

    cid: str

    def take_for_tick(self) -> DeltaEntry | None:
        """Its buffered deltas, now in flight; None when it has none or its call ended."""

    def tick_done(self, reply: TickReply | None, error: Exception | None) -> None:
        """The tick that carried its deltas returned (or failed)."""


class DeltaFlusher:
    """One thread per worker process that writes every buffered delta once a window."""

    def __init__(self, client: redis.Redis, keys: KeySpace, settings: Settings) -> None:
        self.client = client  # its own pool: the thread holds one connection
        self.window_s = settings.flush_interval_ms / 1000
        self.round_trips = 0
        self._keys = keys
        self._maxlen = str(settings.stream_maxlen)
        self._ttl_ms = str(settings.events_ttl_s * 1000)
        self._channel = keys.live_all()
        self._enrolled: dict[int, DeltaSource] = {}
        self._wake = threading.Condition()
        self._ticker = ProcessThread("delta-ticker", self._tick_forever, self._wake)

    def enrol(self, source: DeltaSource) -> None:
        """`source` has deltas: the next tick (within one window) writes them."""
        with self._wake:
            idle = not self._enrolled
            self._enrolled[id(source)] = source
            if not self._ticker.ensure_running() and idle:
                self._wake.notify()

    def _tick_forever(self) -> None:
        last = 0.0
        while True:
            with self._wake:
                while not self._enrolled:
                    self._wake.wait()
                opened = time.monotonic()
            # The first deltas of a quiet spell wait one window, so they coalesce; after a
            # tick, the next comes one window after it: at most one round trip per window.
            time.sleep(max(0.0, max(opened, last) + self.window_s - time.monotonic()))
            with self._wake:
                sources = list(self._enrolled.values())
                self._enrolled.clear()
            last = time.monotonic()
            self.tick(sources)

    def tick(self, sources: Iterable[DeltaSource]) -> None:
        """Writes the deltas `sources` hold in one round trip, and tells each how it went."""
        taken = []
        for source in sources:
            try:
                entry = source.take_for_tick()
            except Exception as exc:  # its leg hears of it; the others' deltas still go
                source.tick_done(None, exc)
                continue
            if entry is not None:
                taken.append((source, entry))
        if not taken:
            return
        try:
            replies = self._send(taken)
        except Exception as exc:  # every leg of the tick hears of it: none waits for nothing
            replies = [exc] * len(taken)
        for (source, _), reply in zip(taken, replies, strict=True):
            if isinstance(reply, Exception):  # the leg raises it as its own write's would
                source.tick_done(None, reply)
            else:
                fenced, cancelled = reply == "fenced", reply == "1"
                source.tick_done(TickReply(fenced=fenced, cancel_requested=cancelled), None)

    def _send(self, taken: list[tuple[DeltaSource, DeltaEntry]]) -> list[str | Exception]:
        """One script call for every conversation of a shard, all in one round trip (one
        shard on one Redis; on a cluster a call may touch one slot, so one per shard). Each
        conversation's reply, or the error of its shard's call."""
        by_shard: dict[int, list[int]] = {}
        for n, (source, _) in enumerate(taken):
            by_shard.setdefault(self._keys.shard_of(source.cid), []).append(n)
        calls = [self._call([taken[n] for n in group]) for group in by_shard.values()]
        answers = self._answers(calls, len(taken))
        self.round_trips += 1
        replies: list[str | Exception] = [""] * len(taken)
        for group, answer in zip(by_shard.values(), answers, strict=True):
            for position, n in enumerate(group):
                replies[n] = answer if isinstance(answer, Exception) else str(answer[position])
        return replies

    def _answers(self, calls: list[tuple[list[str], list[str]]], count: int) -> list[Any]:
        """Each call's answer or error. A cluster's pipeline fails whole when one node does
        not answer: the calls are then made one by one, so that the other shards' deltas
        are written and only the legs on the failed node see the error."""
        action = f"writing the streamed deltas of {count} conversations"
        if len(calls) == 1:
            return [_attempt(action, lambda: _DELTAS(self.client, *calls[0]))]
        try:
            with storage_errors(action), self.client.pipeline(transaction=False) as pipe:
                for keys, args in calls:
                    _DELTAS.queue(pipe, keys, args)
                answers = pipe.execute(raise_on_error=False)
            return [_attempt(action, _raise, a) if isinstance(a, Exception) else a for a in answers]
        except StorageError:
            return [_attempt(action, lambda c=call: _DELTAS(self.client, *c)) for call in calls]

    def _call(self, taken: list[tuple[DeltaSource, DeltaEntry]]) -> tuple[list[str], list[str]]:
        keys: list[str] = []
        for source, _ in taken:
            cid = source.cid
            keys += [self._keys.lease(cid), self._keys.conversation(cid), self._keys.events(cid)]
        entries = [entry for _, entry in taken]
        return keys, [tick_argument(self._maxlen, self._ttl_ms, self._channel, entries)]


def _attempt(action: str, call: Callable[..., Any], *args: Any) -> Any:
    """`call`'s answer, or the StorageError a failed write raises, as a value."""
    try:
        with storage_errors(action):
            return call(*args)
    except StorageError as exc:
        return exc


def _raise(error: Exception) -> NoReturn:
    raise error
