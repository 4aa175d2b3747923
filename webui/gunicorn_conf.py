"""gunicorn's configuration for `signoff web` (`--config python:webui.gunicorn_conf`).

Its workers die with their master, even a SIGKILLed one: on their own they would serve
open event streams for up to the graceful timeout after `signoff up` is gone. A worker
that stopped cleanly exits without the interpreter's teardown (half a second of freeing
the modules it loaded), so that a SIGTERM stops the web process sooner.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from shared.local.children import die_with_parent

__all__ = ["post_fork", "worker_exit"]

_die_with_master = die_with_parent()  # made in the master, before it forks workers


def post_fork(server: Any, worker: Any) -> None:
    """Runs in each new worker: it gets SIGKILL when the master dies."""
    if _die_with_master is not None:
        _die_with_master()


def worker_exit(server: Any, worker: Any) -> None:
    """Runs in a worker as it exits: after a clean stop, exit at once (logs flushed)."""
    leaving = sys.exc_info()[1]  # gunicorn calls this while the worker's SystemExit unwinds
    if isinstance(leaving, SystemExit) and leaving.code in (0, None):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
