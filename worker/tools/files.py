"""The built-in file tools: read_file, list_files and write_file, confined to the workspace.

Every path goes through `resolve_path`, and what is opened is the resolved path, by
`shared.workspace` (``O_NOFOLLOW``, ``O_NONBLOCK``, regular files only); read_file reads
exactly as the clients' and the API's file reads do. Sizes and counts are bounded.
"""

from __future__ import annotations

import os
from typing import Any

from shared.models.config import ToolPolicy
from shared.settings import Settings
from shared.workspace import (
    MAX_READ_BYTES,
    WorkspacePath,
    check_single_link,
    open_regular,
    read_bytes,
)
from worker.tools.base import Tool, ToolContext, ToolFailed, object_schema, tool
from worker.tools.workspace import refusals, resolve_path

__all__ = [
    "FILE_TOOLS",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "MAX_WRITE_BYTES",
    "canonical_path_for",
    "list_files",
    "read_file",
    "write_file",
]

MAX_WRITE_BYTES = 1_000_000
MAX_LIST_ENTRIES = 1_000

_PATH = {"type": "string", "description": "Path relative to the workspace root, with '/'."}


def canonical_path_for(call_args: Any, settings: Settings) -> str | None:
    """The workspace-relative path a file tool call targets; None if it names no allowed path."""
    if not isinstance(call_args, dict):
        return None
    raw = call_args.get("path", ".")
    if not isinstance(raw, str):
        return None
    try:
        return resolve_path(raw, settings).relative
    except ToolFailed:
        return None


def _failure(action: str, target: WorkspacePath, exc: OSError) -> ToolFailed:
    return ToolFailed(f"cannot {action} {target.relative!r}: {exc.strerror or exc}")


@tool(
    description=(
        f"Read a UTF-8 text file from the workspace (at most {MAX_READ_BYTES} bytes). "
        "Returns its canonical path and exact content."
    ),
    parameters=object_schema({"path": _PATH}, required=("path",)),
    canonical_path=canonical_path_for,
)
def read_file(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """Returns a file's exact text; binary, non-UTF-8 and oversized files are refused."""
    target = resolve_path(args["path"], context.settings)
    with refusals():
        data = read_bytes(target, directory_hint="use list_files")
    if b"\x00" in data:
        raise ToolFailed(f"file {target.relative!r} looks binary (it contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolFailed(
            f"file {target.relative!r} is not UTF-8 text (invalid byte at offset {exc.start})"
        ) from exc
    return {"path": target.relative, "content": text, "size": len(data)}


@tool(
    description=(
        "List a workspace directory: entries sorted by name, each with its type "
        f"(file, dir, symlink, other) and size in bytes (files only); at most {MAX_LIST_ENTRIES}."
    ),
    parameters=object_schema({"path": {**_PATH, "default": "."}}),
    canonical_path=canonical_path_for,
)
def list_files(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """Lists one directory without following links, so it reveals nothing outside the root."""
    target = resolve_path(args.get("path", "."), context.settings)
    try:
        with os.scandir(target.path) as scan:
            found = sorted(scan, key=lambda entry: entry.name)
    except NotADirectoryError as exc:
        raise ToolFailed(f"{target.relative!r} is a file, not a directory; use read_file") from exc
    except OSError as exc:
        raise _failure("list", target, exc) from exc
    return {
        "path": target.relative,
        "entries": [_describe(entry) for entry in found[:MAX_LIST_ENTRIES]],
        "total": len(found),
        "truncated": len(found) > MAX_LIST_ENTRIES,
    }


def _describe(entry: os.DirEntry[str]) -> dict[str, Any]:
    size: int | None = None
    if entry.is_symlink():
        kind = "symlink"
    elif entry.is_dir(follow_symlinks=False):
        kind = "dir"
    elif entry.is_file(follow_symlinks=False):
        kind = "file"
        size = _size(entry)
    else:
        kind = "other"
    return {"name": entry.name, "type": kind, "size": size}


def _size(entry: os.DirEntry[str]) -> int | None:
    try:
        return entry.stat(follow_symlinks=False).st_size
    except OSError:
        return None  # removed while listing


@tool(
    description=(
        "Write a UTF-8 text file in the workspace, replacing it if it exists and creating "
        f"missing parent directories (at most {MAX_WRITE_BYTES} bytes)."
    ),
    parameters=object_schema(
        {"path": _PATH, "content": {"type": "string", "description": "The whole new text."}},
        required=("path", "content"),
    ),
    policy=ToolPolicy.ASK,
    canonical_path=canonical_path_for,
)
def write_file(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """Writes a whole file; asks first by default, and only when the workspace is writable."""
    target = resolve_path(args["path"], context.settings, for_write=True)
    data = args["content"].encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolFailed(f"content is {len(data)} bytes; the limit is {MAX_WRITE_BYTES} bytes")
    if target.is_root:
        raise ToolFailed(f"{target.relative!r} is the workspace root, not a file")
    created = not os.path.lexists(target.path)
    _write_bytes(target, data)
    return {"path": target.relative, "bytes_written": len(data), "created": created}


def _write_bytes(target: WorkspacePath, data: bytes) -> None:
    _make_parents(target)
    # Truncated only once it is known to be the workspace's own file (one link).
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    with refusals():
        fd = open_regular(target, flags, "write")
    try:
        with os.fdopen(fd, "wb") as handle:
            with refusals():
                check_single_link(fd, target, "written")
            os.ftruncate(fd, 0)
            handle.write(data)
    except OSError as exc:
        raise _failure("write", target, exc) from exc


def _make_parents(target: WorkspacePath) -> None:
    try:
        target.path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise ToolFailed(f"cannot write {target.relative!r}: a parent of it is a file") from exc
    except OSError as exc:
        raise _failure("create the parents of", target, exc) from exc


FILE_TOOLS: tuple[Tool, ...] = (read_file, list_files, write_file)
