"""A worker process of greenlets: gevent's monkey-patching, before anything else is imported.

Under `SIGNOFF_WORKER_POOL=gevent` (the default) the Celery worker runs Celery's gevent
pool, and the standard library is patched first, so that redis-py, kombu, httpx (the
openai client) and the worker's own threads (the delta ticker, the lease renewer, the
webhook dispatcher) yield at every socket wait instead of holding an OS thread. This
module imports nothing of Signoff's: it must run before `threading`, `socket` and `ssl`
are used by anything.
"""

from __future__ import annotations

import os
import warnings

__all__ = ["patch_if_green"]

_POOL_VARIABLE = "SIGNOFF_WORKER_POOL"  # read here, before settings exist: see Settings.worker_pool


def patch_if_green(argv: list[str]) -> bool:
    """Patches the standard library when this process is to be a gevent pool's worker."""
    if argv[:1] != ["celery-worker"] or os.environ.get(_POOL_VARIABLE, "gevent") != "gevent":
        return False
    from gevent import monkey
    from gevent.monkey import MonkeyPatchWarning

    with warnings.catch_warnings():
        # the interpreter's start may import `ssl`; it is used only through patched sockets
        warnings.filterwarnings("ignore", "Monkey-patching ssl", MonkeyPatchWarning)
        # `queue`'s pure-Python classes stay the standard library's (they run on the patched
        # locks, so they yield all the same): the bounded Redis pool's queue
        # (shared/store/fair_queue.py) builds on its LifoQueue. Only the C SimpleQueue, which
        # would block the whole process (thread pools wait on it: the MCP loop's executor),
        # is replaced, as gevent did before 25.4.
        monkey.patch_all(queue=False)
    import queue

    from gevent.queue import SimpleQueue

    queue.SimpleQueue = SimpleQueue  # type: ignore[misc]
    return True
