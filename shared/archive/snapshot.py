"""A conversation's Redis keys as JSON lines, and back: what an archive file holds.

The first line says what the file is; each other line is one key, named by what follows
the conversation's prefix (`steps`, `turn:<id>`...), with its type, its value and the time
it had left to live. Restoring writes the same keys back under any key prefix.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable
from typing import Any

import redis

from shared.archive.storage import ArchiveStorage
from shared.errors import CorruptRecord
from shared.store.keys import KeySpace

__all__ = [
    "FORMAT",
    "KeyDump",
    "archived_hash",
    "decode",
    "dump_keys",
    "encode",
    "restore_commands",
    "text_lines",
]

FORMAT = 1
KeyDump = dict[str, Any]


def dump_keys(client: redis.Redis, keys: Iterable[str]) -> list[tuple[str, str]]:
    """(key, type) of each key that exists, read in one round trip."""
    names = list(keys)
    with client.pipeline(transaction=False) as pipe:
        for key in names:
            pipe.type(key)
        types = pipe.execute()
    return [(key, str(kind)) for key, kind in zip(names, types, strict=True) if kind != "none"]


def queue_read(pipe: Any, key: str, kind: str) -> None:
    """Queues the read of one key's whole value, and its time to live, on a pipeline."""
    readers = {
        "string": lambda: pipe.get(key),
        "hash": lambda: pipe.hgetall(key),
        "list": lambda: pipe.lrange(key, 0, -1),
        "set": lambda: pipe.smembers(key),
        "zset": lambda: pipe.zrange(key, 0, -1, withscores=True),
        "stream": lambda: pipe.xrange(key, "-", "+"),
    }
    if kind not in readers:
        raise CorruptRecord(f"{key} is a {kind}, which no conversation key is")
    readers[kind]()
    pipe.pttl(key)


def to_json(kind: str, value: Any) -> Any:
    if kind == "set":
        return sorted(value)
    if kind == "zset":
        return [[member, score] for member, score in value]
    if kind == "stream":
        return [[entry_id, _fields(fields)] for entry_id, fields in value]
    return value


def _fields(fields: Any) -> dict[str, Any]:
    """A stream entry's fields; a cluster client's transaction answers them as a flat list
    (name, value, ...), where a plain client's makes a dict."""
    if isinstance(fields, dict):
        return fields
    return dict(zip(fields[0::2], fields[1::2], strict=True))


def encode(header: dict[str, Any], dumps: list[KeyDump]) -> bytes:
    """The archive file's bytes: its header line, then one line per key, compressed."""
    lines = [{"format": FORMAT, **header}, *dumps]
    text = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in lines)
    return gzip.compress(text, mtime=0)


def decode(data: bytes, where: str) -> tuple[dict[str, Any], list[KeyDump]]:
    """The header and the key dumps of an archive file's bytes (`where` names it)."""
    try:
        records = [json.loads(line) for line in text_lines(data) if line.strip()]
    except (OSError, EOFError, ValueError, zlib.error) as exc:
        raise CorruptRecord(f"archive {where} does not read: {exc}") from exc
    if not records or records[0].get("format") != FORMAT:
        raise CorruptRecord(f"archive {where} is not a format-{FORMAT} Signoff archive")
    return records[0], records[1:]


def text_lines(data: bytes) -> list[str]:
    """The file's lines as written (for an export)."""
    return gzip.decompress(data).decode("utf-8").splitlines(keepends=True)


def archived_hash(storage: ArchiveStorage, cid: str, name: str) -> dict[str, str] | None:
    """One hash of an archived conversation (`turn:<id>`...), or None when it has no file."""
    data = storage.get(cid)
    if data is None:
        return None
    _, dumps = decode(data, storage.where(cid))
    found = next((d["value"] for d in dumps if d["name"] == name and d["type"] == "hash"), None)
    return found if isinstance(found, dict) else None


def restore_commands(pipe: Any, keys: KeySpace, cid: str, dumps: list[KeyDump]) -> None:
    """Queues the writes that put every dumped key back (each deleted first)."""
    prefix = keys.conversation_prefix(cid)
    for dump in dumps:
        name, kind, value = str(dump["name"]), dump["type"], dump["value"]
        key = prefix + name
        pipe.delete(key)
        _queue_write(pipe, key, kind, value)
        ttl = int(dump.get("ttl_ms", -1))
        if ttl > 0:
            pipe.pexpire(key, ttl)


def _queue_write(pipe: Any, key: str, kind: str, value: Any) -> None:
    if kind == "string":
        pipe.set(key, value)
    elif kind == "hash" and value:
        pipe.hset(key, mapping=value)
    elif kind == "list" and value:
        pipe.rpush(key, *value)
    elif kind == "set" and value:
        pipe.sadd(key, *value)
    elif kind == "zset" and value:
        pipe.zadd(key, {member: score for member, score in value})
    elif kind == "stream":
        for entry_id, fields in value:
            pipe.xadd(key, fields, id=entry_id)
    elif kind not in ("hash", "list", "set", "zset"):
        raise CorruptRecord(f"an archived key of type {kind!r} cannot be restored")
