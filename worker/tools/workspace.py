"""Turning a path the model gave into a real path that is certainly inside a workspace root.

Paths are relative and use ``/``. They are normalised, joined to a root and resolved
with ``realpath``; the resolved path must lie inside a configured root, so neither
``..`` nor a symbolic link can lead out. What is opened is the resolved path.

With one root, ``src/app.py`` means ``<root>/src/app.py``. With several roots, a
path whose first component is a root's directory name (``docs/index.md``) goes to
that root; any other path goes to the first root. Every root is thus reachable by
its name, and the first also without it. A canonical path is the resolved path
relative to the root holding it; with several roots it always starts with that
root's name, so it reads the same whichever form the model used. A symbolic link
from one root into another is allowed: the target is still inside the workspace.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

from shared.settings import Settings
from worker.tools.base import ToolFailed

__all__ = ["WorkspacePath", "WorkspaceRoot", "resolve_path", "workspace_roots"]


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


def workspace_roots(settings: Settings) -> tuple[WorkspaceRoot, ...]:
    """The configured roots, resolved; refuses none at all or two sharing a name."""
    if not settings.workspace_roots:
        raise ToolFailed("no workspace is configured (set SIGNOFF_WORKSPACE_ROOTS)")
    roots = tuple(
        WorkspaceRoot(name=Path(os.path.abspath(root)).name, real=Path(os.path.realpath(root)))
        for root in settings.workspace_roots
    )
    names = [root.name for root in roots]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if len(roots) > 1 and clashes:
        shared = ", ".join(clashes)
        raise ToolFailed(f"workspace roots share the directory name {shared}; rename one")
    return roots


def resolve_path(raw: str, settings: Settings, *, for_write: bool = False) -> WorkspacePath:
    """The real path `raw` names inside the workspace, or ToolFailed saying why not."""
    if for_write and not settings.workspace_writable:
        raise ToolFailed(
            f"cannot write {raw!r}: the workspace is read-only (SIGNOFF_WORKSPACE_WRITABLE is off)"
        )
    roots = workspace_roots(settings)
    parts = _relative_parts(raw)
    chosen, rest = _choose_root(parts, roots)
    if not chosen.real.is_dir():
        raise ToolFailed(f"workspace root {chosen.name!r} does not exist or is not a directory")
    real = Path(os.path.realpath(chosen.real.joinpath(*rest)))
    holder = _holding_root(real, chosen, roots)
    if holder is None:
        raise ToolFailed(f"path {raw!r} leads outside the workspace through a symbolic link")
    return WorkspacePath(root=holder.real, path=real, relative=_canonical(real, holder, roots))


def _relative_parts(raw: str) -> tuple[str, ...]:
    """The components of a normalised relative path; () for the root itself."""
    if not raw.strip():
        raise ToolFailed("path is empty; use '.' for the workspace root")
    if "\x00" in raw:
        raise ToolFailed(f"path {raw!r} contains a NUL character")
    if posixpath.isabs(raw):
        raise ToolFailed(f"path {raw!r} is absolute; give a path relative to the workspace root")
    normal = posixpath.normpath(raw)
    if normal == ".." or normal.startswith("../"):
        raise ToolFailed(f"path {raw!r} leads outside the workspace through '..'")
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
