"""How the web process runs: gunicorn with Signoff's gevent workers, configured from settings.

A connection is a greenlet, not a thread (`webui.serving`): event streams, kept-alive and
slow clients cost a few kilobytes each, and the worker bounds how long a client may take to
send its request or to take the response.
"""

from __future__ import annotations

from shared.settings import Settings

__all__ = ["WORKER_CLASS", "gunicorn_args"]

WORKER_CLASS = "webui.serving.Worker"


def gunicorn_args(settings: Settings) -> list[str]:
    """gunicorn's command line for the web process, as `signoff web` and `signoff up` start it."""
    return [
        "--worker-class",
        WORKER_CLASS,
        "--workers",
        str(settings.web_workers),
        "--worker-connections",
        str(settings.web_connections),
        "--bind",
        f"{settings.web_host}:{settings.web_port}",
        # The master kills a worker whose loop has not checked in for this long: a greenlet
        # that blocks the whole process (never one waiting for I/O: streams are fine).
        "--timeout",
        "30",
        "--graceful-timeout",
        str(settings.web_shutdown_timeout_s),
        # An idle kept-alive connection stays open longer than clients keep theirs (httpx 5 s,
        # browsers about 60 s): closed sooner (gunicorn's 2 s), a client that reuses it just
        # as it closes gets a reset instead of an answer. An idle connection is a greenlet.
        "--keep-alive",
        "75",
        "--backlog",
        "2048",
        "--access-logfile",
        "-",
        "--no-control-socket",  # else one socket in ~/.gunicorn/, shared by every instance
        "--config",
        "python:webui.gunicorn_conf",  # workers die with their master
        "webui.wsgi:app",
    ]
