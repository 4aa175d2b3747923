"""A conversation's Redis keys as JSON lines, and back: what an archive file holds.

The first line says what the file is; each other line is one key, named by what follows
the conversation's prefix (`steps`, `turn:<id>`...), with its type, its value and the time
it had left to live. Restoring writes the same keys back under any key prefix.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import redis

from shared.errors import CorruptRecord
from shared.store.keys import KeySpace, check_id

__all__ = [
    "FORMAT",
    "KeyDump",
    "archive_path",
    "dump_keys",
    "read_file",
    "restore_commands",
    "write_file",
]

FORMAT = 1
KeyDump = dict[str, Any]


def archive_path(root: Path, cid: str) -> Path:
    """Where a conversation's archive lives: spread over 256 folders by its id's start."""
    check_id(cid, "conversation id")
    return root / cid[:2].lower() / f"{cid}.jsonl.gz"


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
        return [[entry_id, fields] for entry_id, fields in value]
    return value


def write_file(path: Path, header: dict[str, Any], dumps: list[KeyDump]) -> None:
    """Writes the file whole or not at all: a temporary file, fsync, rename, fsync the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
            for record in [{"format": FORMAT, **header}, *dumps]:
                out.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
            out.flush()
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def read_file(path: Path) -> tuple[dict[str, Any], list[KeyDump]]:
    """The header and the key dumps of an archive file."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            records = [json.loads(line) for line in lines if line.strip()]
    except (OSError, EOFError, ValueError) as exc:
        raise CorruptRecord(f"archive {path} does not read: {exc}") from exc
    if not records or records[0].get("format") != FORMAT:
        raise CorruptRecord(f"archive {path} is not a format-{FORMAT} Signoff archive")
    return records[0], records[1:]


def archived_hash(root: Path, cid: str, name: str) -> dict[str, str] | None:
    """One hash of an archived conversation (`turn:<id>`...), or None when it has no file."""
    path = archive_path(root, cid)
    if not path.is_file():
        return None
    _, dumps = read_file(path)
    found = next((d["value"] for d in dumps if d["name"] == name and d["type"] == "hash"), None)
    return found if isinstance(found, dict) else None


def raw_lines(path: Path) -> Iterator[str]:
    """The file's lines as written (for an export)."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        yield from lines


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
