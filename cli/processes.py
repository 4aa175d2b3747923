"""Commands that run Signoff's processes: `worker`, `beat`, `web`, and `up` for all of them."""

from __future__ import annotations

import os
import secrets
import sys

import click

from cli.supervisor import Stopped, Supervisor, stop_on_signals
from cli.web_server import gunicorn_args
from shared.settings import load_settings

__all__ = ["beat", "up", "web", "worker"]


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(celery_args: tuple[str, ...]) -> None:
    """Run a worker (Celery, thread pool); extra arguments go to Celery."""
    load_settings()  # fail here, with the variable named, not inside Celery
    os.execv(sys.executable, [sys.executable, "-m", "worker", "worker", *celery_args])


@click.command()
def beat() -> None:
    """Run the scheduler that sweeps expired approvals and stalled turns."""
    load_settings()
    os.execv(sys.executable, [sys.executable, "-m", "worker", "beat"])


@click.command()
def web() -> None:
    """Serve the operator UI and the JSON API (gunicorn, gevent workers)."""
    settings = load_settings()
    if not settings.secret_key.get_secret_value():
        # every gunicorn worker must sign sessions with the same key, or sign-in breaks
        os.environ["SIGNOFF_SECRET_KEY"] = secrets.token_urlsafe(32)
        click.secho(
            "warning: SIGNOFF_SECRET_KEY is not set; sessions end when the server restarts",
            fg="yellow",
            err=True,
        )
    os.execv(sys.executable, [sys.executable, "-m", "gunicorn", *gunicorn_args(settings)])


@click.command()
@click.option("--demo", is_flag=True, help="Run the demo batch (examples/prompts.jsonl) once.")
@click.option("--port", type=int, default=None, help="Web port (default: SIGNOFF_WEB_PORT).")
def up(demo: bool, port: int | None) -> None:
    """Start everything here, with its own Redis unless SIGNOFF_REDIS_URL is set.

    Ctrl-C, SIGTERM or a closed terminal stop it all; its state is kept in .signoff/.
    """
    shared_redis = os.environ.get("SIGNOFF_REDIS_URL") or None
    supervisor = Supervisor(load_settings(), web_port=port, redis_url=shared_redis)
    with stop_on_signals():
        try:
            supervisor.start()
            if demo:
                from cli.demo import run_demo

                run_demo(supervisor)
            supervisor.wait()
        except Stopped as stop:
            click.echo(f"\n{stop.signal_name}: stopping...", err=True)
        finally:
            supervisor.stop()
