"""The workspace: the directories files may be read from, and the one confined, exact read.

The worker's file tools and the clients' and API's `read_file` all go through here,
so a path is confined the same way wherever it comes from.

Paths are relative and use ``/``. They are normalised, joined to a root and resolved
with ``realpath``; the resolved path must lie inside a configured root, so neither
``..`` nor a symbolic link can lead out. What is opened is the resolved path, with
``O_NOFOLLOW`` so a link swapped in afterwards is not followed, and ``O_NONBLOCK`` so
a FIFO cannot hang the reader; only a regular file is read, and only one with a
single hard link, since another link to it may lie outside the roots.

With one root, ``src/app.py`` means ``<root>/src/app.py``. With several roots, a
path whose first component is a root's directory name (``docs/index.md``) goes to
that root; any other path goes to the first root. Every root is thus reachable by
its name, and the first also without it. A canonical path is the resolved path
relative to the root holding it; with several roots it always starts with that
root's name, so it reads the same whichever form was used. A symbolic link from one
root into another is allowed: the target is still inside the workspace.

Errors: `PathRefused` for a path that leads out or names no readable file, `NotFound`
for a file that does not exist, `NotConfigured` when the roots are unset or unusable.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from shared.errors import NotConfigured, NotFound, PathRefused, SignoffError
from shared.settings import Settings

__all__ = [
    "MAX_READ_BYTES",
    "FileRead",
    "WorkspacePath",
    "WorkspaceRoot",
    "check_single_link",
    "open_regular",
    "read_bytes",
    "read_file",
    "resolve_path",
    "workspace_roots",
]

MAX_READ_BYTES = 1_000_000
"""The largest file a read returns; a larger one is refused, not truncated."""

_MISSING = frozenset({errno.ENOENT, errno.ENOTDIR})


class FileRead(BaseModel):
    """Exact content returned by a portable workspace-relative file read (bytes as base64)."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    path: str = Field(description="The path as asked.")
    canonical_path: str = Field(
        description="The resolved path relative to the root holding it, as read_file reports it."
    )
    data: bytes = Field(description="The file's exact bytes.")
    text: str | None = Field(description="The bytes as text when they are valid UTF-8, else null.")
    size: int = Field(ge=0, description="The number of bytes.")


@dataclass(frozen=True)
class WorkspaceRoot:
    """A configured root: the name a path may start with, and its resolved directory."""

    name: str
    real: Path


@dataclass(frozen=True)
class WorkspacePath:
    """A path checked to lie inside a root; `relative` is its canonical workspace name."""

    root: Path
    path: Path
    relative: str

    @property
    def is_root(self) -> bool:
        return self.path == self.root


def read_file(path: str, settings: Settings) -> FileRead:
    """The exact bytes of the workspace file `path` names, confined as the read_file tool is."""
    target = resolve_path(path, settings)
    data = read_bytes(target)
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return FileRead(path=path, canonical_path=target.relative, data=data, text=text, size=len(data))


def workspace_roots(settings: Settings) -> tuple[WorkspaceRoot, ...]:
    """The configured roots, resolved; refuses none at all or two sharing a name."""
    if not settings.workspace_roots:
        raise NotConfigured(
            "no workspace is configured: file tools and file reads need SIGNOFF_WORKSPACE_ROOTS"
        )
    roots = tuple(
        WorkspaceRoot(name=Path(os.path.abspath(root)).name, real=Path(os.path.realpath(root)))
        for root in settings.workspace_roots
    )
    names = [root.name for root in roots]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if len(roots) > 1 and clashes:
        shared = ", ".join(clashes)
        raise NotConfigured(f"workspace roots share the directory name {shared}; rename one")
    return roots


def resolve_path(raw: str, settings: Settings, *, for_write: bool = False) -> WorkspacePath:
    """The real path `raw` names inside the workspace, or an error saying why not."""
    if for_write and not settings.workspace_writable:
        raise PathRefused(
            f"cannot write {raw!r}: the workspace is read-only (SIGNOFF_WORKSPACE_WRITABLE is off)"
        )
    roots = workspace_roots(settings)
    parts = _relative_parts(raw)
    chosen, rest = _choose_root(parts, roots)
    if not chosen.real.is_dir():
        raise NotConfigured(f"workspace root {chosen.name!r} does not exist or is not a directory")
    real = Path(os.path.realpath(chosen.real.joinpath(*rest)))
    holder = _holding_root(real, chosen, roots)
    if holder is None:
        raise PathRefused(f"path {raw!r} leads outside the workspace through a symbolic link")
    return WorkspacePath(root=holder.real, path=real, relative=_canonical(real, holder, roots))


def check_single_link(fd: int, target: WorkspacePath, action: str) -> None:
    """Refuses a file with more than one hard link: another may lie outside the workspace."""
    links = os.fstat(fd).st_nlink
    if links > 1:
        raise PathRefused(
            f"file {target.relative!r} has {links} hard links; only a file with one is "
            f"{action}, since another may lie outside the workspace"
        )


def read_bytes(target: WorkspacePath, *, directory_hint: str = "") -> bytes:
    """A resolved file's bytes: a regular file with one link, at most MAX_READ_BYTES."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = open_regular(target, flags, "read", directory_hint=directory_hint)
    with os.fdopen(fd, "rb") as handle:
        check_single_link(fd, target, "read")
        try:
            data = handle.read(MAX_READ_BYTES + 1)
        except OSError as exc:
            raise _failure("read", target, exc) from exc
    if len(data) > MAX_READ_BYTES:
        raise PathRefused(f"file {target.relative!r} is over the limit of {MAX_READ_BYTES} bytes")
    return data


def open_regular(
    target: WorkspacePath, flags: int, action: str, *, directory_hint: str = ""
) -> int:
    """A descriptor on the resolved path, refusing anything but a regular file."""
    try:
        fd = os.open(target.path, flags, 0o644)
    except OSError as exc:
        raise _failure(action, target, exc) from exc
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    if stat.S_ISDIR(mode):
        advice = f"; {directory_hint}" if directory_hint else ", not a file"
        raise PathRefused(f"{target.relative!r} is a directory{advice}")
    raise PathRefused(f"{target.relative!r} is not a regular file")


def _failure(action: str, target: WorkspacePath, exc: OSError) -> SignoffError:
    message = f"cannot {action} {target.relative!r}: {exc.strerror or exc}"
    return NotFound(message) if exc.errno in _MISSING else PathRefused(message)


def _relative_parts(raw: str) -> tuple[str, ...]:
    """The components of a normalised relative path; () for the root itself."""
    if not raw.strip():
        raise PathRefused("path is empty; use '.' for the workspace root")
    if "\x00" in raw:
        raise PathRefused(f"path {raw!r} contains a NUL character")
    if posixpath.isabs(raw):
        raise PathRefused(f"path {raw!r} is absolute; give a path relative to the workspace root")
    normal = posixpath.normpath(raw)
    if normal == ".." or normal.startswith("../"):
        raise PathRefused(f"path {raw!r} leads outside the workspace through '..'")
    return () if normal == "." else tuple(normal.split("/"))


def _choose_root(
    parts: tuple[str, ...], roots: tuple[WorkspaceRoot, ...]
) -> tuple[WorkspaceRoot, tuple[str, ...]]:
    if len(roots) > 1 and parts:
        for root in roots:
            if root.name == parts[0]:
                return root, parts[1:]
    return roots[0], parts


def _holding_root(
    real: Path, chosen: WorkspaceRoot, roots: tuple[WorkspaceRoot, ...]
) -> WorkspaceRoot | None:
    for root in (chosen, *roots):
        if real.is_relative_to(root.real):
            return root
    return None


def _canonical(real: Path, holder: WorkspaceRoot, roots: tuple[WorkspaceRoot, ...]) -> str:
    inner = real.relative_to(holder.real).as_posix()
    if len(roots) == 1:
        return inner
    return holder.name if inner == "." else f"{holder.name}/{inner}"
