"""Moves finished conversations past their retention out of Redis and into archive files.

Each conversation goes in three steps: a claim (one script: it must be finished and old
enough, and from then on it takes no prompt), the file (written whole, then renamed), and
the removal (a transaction that first checks the claim is still ours). A crash before the
file leaves the claim, which the next pass takes up; a crash after it rewrites the same
file; the removal happens once. Nothing leaves Redis before its file is on disk.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import redis

from shared.archive.retention import RetentionStore, retention_of
from shared.archive.snapshot import (
    KeyDump,
    decode,
    dump_keys,
    encode,
    queue_read,
    restore_commands,
    text_lines,
    to_json,
)
from shared.archive.storage import ArchiveUnavailable, storage_for
from shared.archive.view import ArchivedConversation
from shared.errors import Conflict, CorruptRecord, NotFound
from shared.models.config import ConversationConfig
from shared.settings import Settings
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace, check_id
from shared.store.lua import LuaScript
from shared.store.sharded import zset_page

__all__ = ["ArchivePass", "Archiver"]

log = logging.getLogger(__name__)

PAGE = 500  # conversations read per round trip while looking for candidates
_CLAIM = LuaScript(
    "shared.store",
    "archive_claim.lua",
    keys=["conversation", "inbox", "lease"],
    args=["finished_before", "token"],
)
# Every key of a conversation by its name after the prefix, but its turns and notifications.
_FIXED = (
    "conv",
    "inbox",
    "lease",
    "fence",
    "toolresults",
    "events",
    "notifications",
    "turn_ids",
    "notification_ids",
)


@dataclass
class ArchivePass:
    """What one pass did: conversations archived, and those it could not (with why)."""

    archived: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    audit_trimmed: int = 0


class Archiver:
    """Archives, exports and restores conversations; the scheduler runs `run_pass`."""

    def __init__(self, client: redis.Redis, keys: KeySpace, settings: Settings) -> None:
        self.client = client
        self.keys = keys
        self.settings = settings
        self.storage = storage_for(settings)
        self.rules = RetentionStore(client, keys)

    # A pass

    def run_pass(self, *, now: float | None = None, limit: int = 1_000) -> ArchivePass:
        """Archives up to `limit` conversations past their retention; trims the audit log."""
        now = time.time() if now is None else now
        done = ArchivePass(audit_trimmed=self._trim_audit(now))
        rules = self.rules.rules()
        start = 0
        while rules and len(done.archived) < limit:
            page = self._page(start)
            if not page:
                break
            moved = 0  # archived ones leave the index: the next page starts that much earlier
            for cid, config in page:
                seconds = retention_of(rules, config) if config is not None else None
                if seconds is None or len(done.archived) >= limit:
                    continue
                try:
                    if self.archive(cid, finished_before=now - seconds):
                        done.archived.append(cid)
                        moved += 1
                except ArchiveUnavailable as exc:  # no file can be written: try next pass
                    log.warning("archive pass stopped: %s", exc)
                    done.failed[cid] = str(exc)
                    return done
                except CorruptRecord as exc:  # this one stays; the rest go on
                    log.warning("conversation %s not archived: %s", cid, exc)
                    done.failed[cid] = str(exc)
            start += len(page) - moved
        return done

    def _page(self, start: int) -> list[tuple[str, ConversationConfig | None]]:
        """A page of the conversations index (oldest first), each with its config."""
        with storage_errors("listing conversations to archive"):
            indexes = self.keys.every_shard(self.keys.conversations)
            ids = [cid for cid, _ in zset_page(self.client, indexes, start, PAGE, newest=False)]
            with self.client.pipeline(transaction=False) as pipe:
                for cid in ids:
                    pipe.hget(self.keys.conversation(cid), "config")
                configs = pipe.execute() if ids else []
        page: list[tuple[str, ConversationConfig | None]] = []
        for cid, raw in zip(ids, configs, strict=True):
            try:
                page.append((cid, ConversationConfig.model_validate_json(raw) if raw else None))
            except ValueError:
                log.warning("conversation %s: its config does not parse; not archived", cid)
                page.append((cid, None))
        return page

    def _trim_audit(self, now: float) -> int:
        days = self.settings.audit_retention_days
        if days <= 0:
            return 0
        oldest_ms = int((now - days * 86_400) * 1000)
        with storage_errors("trimming the audit log"):
            return int(
                self.client.xtrim(self.keys.audit(), minid=f"{oldest_ms}-0", approximate=False)
            )

    # One conversation

    def archive(self, cid: str, *, finished_before: float | None = None) -> bool:
        """Archives one conversation if it is finished (and last changed before
        `finished_before`); True once it is out of Redis and in its file."""
        check_id(cid, "conversation id")
        keys = [self.keys.conversation(cid), self.keys.inbox(cid), self.keys.lease(cid)]
        before = time.time() if finished_before is None else finished_before
        with storage_errors(f"claiming conversation {cid} for the archive"):
            reply = _CLAIM(self.client, keys, [repr(before), uuid.uuid4().hex])
        if reply[0] != "claimed":
            if finished_before is None and reply[0] == "busy":
                raise Conflict(
                    f"conversation {cid} is not finished: a turn is queued, running or waiting"
                )
            if finished_before is None and reply[0] == "not_found":
                raise NotFound(f"conversation {cid} does not exist (or is archived already)")
            return False
        token = str(reply[1])
        dumps = self._snapshot(cid)
        header = {"conversation_id": cid, "archived_at": time.time(), "claim": token}
        try:
            self.storage.put(cid, encode(header, dumps))
        except ArchiveUnavailable:
            self._release(cid, token)  # it stays in Redis, taking prompts, until the next pass
            raise
        return self._remove(cid, token, dumps)

    def key_names(self, cid: str) -> list[str]:
        prefix = self.keys.conversation_prefix(cid)
        history = self.keys.history(cid)
        fixed = [prefix + name for name in _FIXED]
        with storage_errors(f"reading conversation {cid}"):
            turns = self.client.smembers(self.keys.turn_ids(cid))
            notes = self.client.smembers(self.keys.notification_ids(cid))
            if not turns:  # written before turn ids were kept: find its keys by their prefix
                return sorted(
                    set(str(k) for k in self.client.scan_iter(match=prefix + "*", count=1_000))
                    | set(fixed)
                    | set(history)
                )
        named = [self.keys.turn(cid, str(t)) for t in turns]
        named += [self.keys.notification(str(n)) for n in notes]
        return [*fixed, *history, *named]

    def _snapshot(self, cid: str) -> list[KeyDump]:
        """Every key of the conversation, read in one transaction (one consistent view)."""
        prefix = self.keys.conversation_prefix(cid)
        with storage_errors(f"reading conversation {cid} for the archive"):
            present = dump_keys(self.client, self.key_names(cid))
            with self.client.pipeline(transaction=True) as pipe:
                for key, kind in present:
                    queue_read(pipe, key, kind)
                replies = pipe.execute()
        dumps = []
        for n, (key, kind) in enumerate(present):
            value, ttl = replies[2 * n], replies[2 * n + 1]
            dumps.append(
                {
                    "name": key.removeprefix(prefix),
                    "type": kind,
                    "value": to_json(kind, value),
                    "ttl_ms": int(ttl),
                }
            )
        return dumps

    def _remove(self, cid: str, token: str, dumps: list[KeyDump]) -> bool:
        """Removes what was archived, if the claim is still ours (else nothing)."""
        prefix = self.keys.conversation_prefix(cid)
        notes = [d["value"] for d in dumps if d["name"] == "notification_ids"]
        with (
            storage_errors(f"removing archived conversation {cid}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.watch(self.keys.conversation(cid))
            if pipe.hget(self.keys.conversation(cid), "archiving") != token:
                pipe.unwatch()
                return False
            pipe.multi()
            pipe.delete(*[prefix + str(d["name"]) for d in dumps])
            shard = self.keys.shard_of(cid)
            for index in (self.keys.conversations, self.keys.failures, self.keys.active):
                pipe.zrem(index(shard), cid)
            together = self.keys.shards == 1  # the notifications index: another slot
            if notes and notes[0] and together:
                pipe.zrem(self.keys.notifications_all(), *notes[0])
            pipe.zadd(self.keys.archived(shard), {cid: time.time()})
            try:
                pipe.execute()
            except redis.WatchError:
                return False
        if notes and notes[0] and not together:
            with storage_errors(f"unindexing the notifications of {cid}"):
                self.client.zrem(self.keys.notifications_all(), *notes[0])
        return True

    def _release(self, cid: str, token: str) -> None:
        """Gives a claim up (its file could not be written): the conversation takes prompts
        again. Another claim since is left alone."""
        key = self.keys.conversation(cid)
        with (
            storage_errors(f"releasing the archive claim on {cid}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.watch(key)
            if pipe.hget(key, "archiving") != token:
                pipe.unwatch()
                return
            pipe.multi()
            pipe.hdel(key, "archiving")
            with contextlib.suppress(redis.WatchError):  # claimed again since: left alone
                pipe.execute()

    # Out and back

    def is_archived(self, cid: str) -> bool:
        with storage_errors(f"reading the archive index for {cid}"):
            return self.client.zscore(self.keys.archived(self.keys.shard_of(cid)), cid) is not None

    def newest(self, limit: int = 50) -> list[tuple[str, float]]:
        """The newest archived conversations, with when each was archived."""
        with storage_errors("listing archived conversations"):
            return zset_page(self.client, self.keys.every_shard(self.keys.archived), 0, limit)

    def file(self, cid: str) -> bytes:
        """The conversation's archive file; NotFound when it has none."""
        data = self.storage.get(cid)
        if data is None:
            raise NotFound(f"conversation {cid} has no archive file ({self.storage.where(cid)})")
        return data

    def read(self, cid: str) -> tuple[dict[str, Any], list[KeyDump]]:
        return decode(self.file(cid), self.storage.where(cid))

    def view(self, cid: str) -> ArchivedConversation:
        """An archived conversation as the read-only page shows it; NotFound if not archived."""
        if not self.is_archived(cid):
            raise NotFound(f"conversation {cid} is not archived")
        return ArchivedConversation.from_file(*self.read(cid))

    def export_lines(self, cid: str) -> Iterator[str]:
        """The archive file's JSON lines (an archived conversation)."""
        data = self.file(cid)
        decode(data, self.storage.where(cid))  # a corrupt file is refused before any line
        yield from text_lines(data)

    def restore(self, cid: str) -> None:
        """Puts an archived conversation back into Redis as it was; its file stays."""
        if not self.is_archived(cid):
            raise Conflict(f"conversation {cid} is not archived")
        _, dumps = self.read(cid)
        conv = next((d["value"] for d in dumps if d["name"] == "conv"), None)
        if not conv:
            raise CorruptRecord(f"the archive of {cid} holds no conversation record")
        notes: list[str] = next((d["value"] for d in dumps if d["name"] == "notification_ids"), [])
        with (
            storage_errors(f"restoring conversation {cid}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            restore_commands(pipe, self.keys, cid, dumps)
            pipe.hdel(self.keys.conversation(cid), "archiving")
            shard = self.keys.shard_of(cid)
            pipe.zadd(self.keys.conversations(shard), {cid: float(conv.get("created_at", 0))})
            pipe.zrem(self.keys.archived(shard), cid)
            times = _notification_times(dumps, notes)
            if self.keys.shards == 1:
                for nid, created in times.items():
                    pipe.zadd(self.keys.notifications_all(), {nid: created})
            pipe.execute()
        if self.keys.shards > 1 and times:  # the notifications index: another slot
            with storage_errors(f"indexing the notifications of {cid}"):
                self.client.zadd(self.keys.notifications_all(), times)


def _notification_times(dumps: list[KeyDump], ids: list[str]) -> dict[str, float]:
    """Each archived notification's creation time, for the index of every notification."""
    hashes = {d["name"]: d["value"] for d in dumps if str(d["name"]).startswith("notification:")}
    times = {}
    for nid in ids:
        record = hashes.get(f"notification:{nid.rpartition('.')[2]}")
        if isinstance(record, dict):
            times[nid] = float(record.get("created_at") or 0)
    return times
