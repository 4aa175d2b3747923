"""How the web process runs: gunicorn with gthread workers, configured from settings."""

from __future__ import annotations

from shared.settings import Settings

__all__ = ["gunicorn_args"]


def gunicorn_args(settings: Settings) -> list[str]:
    """gunicorn's command line for the web process, as `signoff web` and `signoff up` start it."""
    return [
        "--worker-class",
        "gthread",
        "--workers",
        str(settings.web_workers),
        "--threads",
        str(settings.web_threads),
        "--bind",
        f"{settings.web_host}:{settings.web_port}",
        "--timeout",
        "0",  # SSE responses are long-lived; gthread keeps serving others meanwhile
        # An idle kept-alive connection stays open longer than clients keep theirs (httpx 5 s,
        # browsers about 60 s): closed sooner (gunicorn's 2 s), a client that reuses it just
        # as it closes gets a reset instead of an answer.
        "--keep-alive",
        "75",
        "--access-logfile",
        "-",
        "--no-control-socket",  # else one socket in ~/.gunicorn/, shared by every instance
        "--config",
        "python:webui.gunicorn_conf",  # workers die with their master
        "webui.wsgi:app",
    ]
