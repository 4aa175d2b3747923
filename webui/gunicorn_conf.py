"""gunicorn's configuration for `signoff web` (`--config python:webui.gunicorn_conf`).

Its workers die with their master, even a SIGKILLed one: on their own they would serve
open event streams for up to the graceful timeout after `signoff up` is gone.
"""

from __future__ import annotations

from typing import Any

from shared.local.children import die_with_parent

__all__ = ["post_fork"]

_die_with_master = die_with_parent()  # made in the master, before it forks workers


def post_fork(server: Any, worker: Any) -> None:
    """Runs in each new worker: it gets SIGKILL when the master dies."""
    if _die_with_master is not None:
        _die_with_master()
