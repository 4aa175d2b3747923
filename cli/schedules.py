"""`signoff schedule`: run a named agent on a cron expression, an interval, or once.

`signoff beat` fires them; these commands write and read the records it fires from.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import click

from shared.client import Client
from shared.models.schedules import Missed, NewSchedule, Overlap, RunMode, ScheduleStatus
from shared.validation import checked_options

__all__ = ["schedule"]

F = TypeVar("F", bound=Callable[..., Any])


def _when(moment: float, zone: str) -> str:
    return datetime.fromtimestamp(moment, ZoneInfo(zone)).isoformat(timespec="seconds")


def _timing(status: ScheduleStatus) -> str:
    found = status.schedule
    if found.cron is not None:
        return f"cron {found.cron!r} ({found.timezone})"
    if found.every_s is not None:
        return f"every {found.every_s:g} s"
    assert found.at is not None
    return f"once at {found.at.isoformat()}"


def _state(status: ScheduleStatus) -> str:
    if status.paused:
        return "paused"
    if not status.next_fire_times:
        return "done"
    return f"next {_when(status.next_fire_times[0], status.schedule.timezone)}"


def _choice(flag: str, default: Enum, help_text: str) -> Callable[[F], F]:
    """An option whose values are those of `default`'s enum."""
    values = [member.value for member in type(default)]
    return click.option(
        flag, type=click.Choice(values), default=default.value, show_default=True, help=help_text
    )


@click.group()
def schedule() -> None:
    """Schedules: run an agent by cron, interval or once; `signoff beat` fires them."""


@schedule.command("create")
@click.argument("name")
@click.option("--agent", required=True, help="The named agent to run.")
@click.option("--agent-version", type=int, default=None, help="Pin a version (default: latest).")
@click.option("--prompt", required=True, help="What each run sends the agent.")
@click.option("--cron", default=None, help="A cron expression (6 fields: seconds first).")
@click.option("--tz", "timezone", default="UTC", show_default=True, help="Time zone of --cron.")
@click.option("--every", "every_s", type=float, default=None, help="Fire every this many seconds.")
@click.option("--at", "at", default=None, help="Fire once, at this ISO time with its offset.")
@_choice("--conversation", RunMode.NEW, "Each run starts a new conversation, or continues one.")
@_choice("--overlap", Overlap.SKIP, "A fire while the last run works: skip, queue, or cancel it.")
@_choice("--missed", Missed.RUN_ONCE, "A fire missed while no beat ran: run it once, or skip it.")
def create(name: str, **values: object) -> None:
    """Create schedule NAME; prints its next fire times."""
    new = checked_options(NewSchedule, "schedule", {"name": name, **values})
    with Client() as client:
        store = client.stores.schedules
        store.create(new, actor=f"cli:{getpass.getuser()}")
        status = store.status(name)
    click.echo(f"created schedule {name}: {_timing(status)}")
    for moment in status.next_fire_times:
        click.echo(f"  next: {_when(moment, new.timezone)}")


@schedule.command("list")
def list_() -> None:
    """Every schedule: its agent, timing, state and runs."""
    with Client() as client:
        found = client.stores.schedules.list()
    if not found:
        click.echo("no schedules yet (signoff schedule create NAME --agent A ...)")
    for status in found:
        click.echo(
            f"{status.schedule.name:<20} {status.schedule.agent:<20} {_timing(status):<36} "
            f"{_state(status)}  runs {status.runs}, skipped {status.skipped}"
        )


@schedule.command("show")
@click.argument("name")
@click.option("--runs", "run_count", default=10, show_default=True, type=click.IntRange(0, 1000))
def show(name: str, run_count: int) -> None:
    """NAME as JSON (with its next fire times), then its latest runs."""
    with Client() as client:
        store = client.stores.schedules
        status = store.status(name)
        runs = store.runs(name, limit=run_count) if run_count else []
    click.echo(status.model_dump_json(indent=2))
    zone = status.schedule.timezone
    for run in runs:
        where = run.conversation_id or "-"
        click.echo(f"{_when(run.due, zone)} {run.outcome.value:<17} {where} {run.detail}")


@schedule.command("pause")
@click.argument("name")
def pause(name: str) -> None:
    """No fires until resumed."""
    with Client() as client:
        client.stores.schedules.pause(name)
    click.echo(f"paused schedule {name}")


@schedule.command("resume")
@click.argument("name")
def resume(name: str) -> None:
    """Fire again, from the first slot after now."""
    with Client() as client:
        store = client.stores.schedules
        store.resume(name)
        status = store.status(name)
    click.echo(f"resumed schedule {name}: {_state(status)}")


@schedule.command("delete")
@click.argument("name")
def delete(name: str) -> None:
    """Delete NAME (its conversations stay)."""
    with Client() as client:
        client.stores.schedules.delete(name)
    click.echo(f"deleted schedule {name}")
