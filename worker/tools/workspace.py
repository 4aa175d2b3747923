"""The workspace as the file tools see it: `shared.workspace`, its refusals as ToolFailed.

The confinement itself (roots, `..`, links, what may be opened) lives in
`shared.workspace`, so the web and the clients read files exactly as the tools do;
here its errors become `ToolFailed`, whose message goes back to the model as is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from shared import workspace
from shared.errors import NotConfigured, NotFound, PathRefused
from shared.settings import Settings
from shared.workspace import WorkspacePath, WorkspaceRoot
from worker.tools.base import ToolFailed

__all__ = ["WorkspacePath", "WorkspaceRoot", "refusals", "resolve_path", "workspace_roots"]


@contextmanager
def refusals() -> Iterator[None]:
    """Turns the workspace's refusals into ToolFailed with the same message."""
    try:
        yield
    except (PathRefused, NotFound, NotConfigured) as exc:
        raise ToolFailed(exc.message) from exc


def workspace_roots(settings: Settings) -> tuple[WorkspaceRoot, ...]:
    """The configured roots, resolved; ToolFailed for none at all or two sharing a name."""
    with refusals():
        return workspace.workspace_roots(settings)


def resolve_path(raw: str, settings: Settings, *, for_write: bool = False) -> WorkspacePath:
    """The real path `raw` names inside the workspace, or ToolFailed saying why not."""
    with refusals():
        return workspace.resolve_path(raw, settings, for_write=for_write)
