"""The open-files limit of a process that holds many sockets (a web or a worker process)."""

from __future__ import annotations

import contextlib
import resource

__all__ = ["raise_open_files_limit"]


def raise_open_files_limit(wanted: int) -> None:
    """A connection is a file descriptor: lift the soft limit toward what the process may hold."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
