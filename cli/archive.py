"""`signoff archive`: retention rules, and archived conversations out and back."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from shared.archive.archiver import Archiver
from shared.archive.retention import (
    RetentionRule,
    RetentionScope,
    RetentionStore,
    parse_retention,
)
from shared.client import Client
from shared.errors import InvalidInput

__all__ = ["archive"]


def _archiver(client: Client) -> Archiver:
    return Archiver(client.redis, client.keys, client.settings)


def _scope(agent: str | None, batch: str | None, label: str | None) -> tuple[RetentionScope, str]:
    given = [
        (s, n)
        for s, n in (
            (RetentionScope.AGENT, agent),
            (RetentionScope.BATCH, batch),
            (RetentionScope.LABEL, label),
        )
        if n is not None
    ]
    if len(given) > 1:
        raise InvalidInput("give at most one of --agent, --batch and --label")
    return given[0] if given else (RetentionScope.GLOBAL, "")


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


_SCOPE_OPTIONS = (
    click.option("--agent", default=None, help="The rule of one agent's conversations."),
    click.option("--batch", default=None, help="The rule of one batch's conversations."),
    click.option("--label", default=None, help="The rule of conversations with this label."),
)


def _scoped(func: Any) -> Any:
    for option in reversed(_SCOPE_OPTIONS):
        func = option(func)
    return func


@click.group()
def archive() -> None:
    """Retention: finished conversations leave Redis for archive files (SIGNOFF_ARCHIVE_DIR)."""


@archive.group()
def retention() -> None:
    """How long a finished conversation stays in Redis (default: it stays)."""


@retention.command("set")
@click.argument("duration")
@_scoped
def retention_set(duration: str, agent: str | None, batch: str | None, label: str | None) -> None:
    """Keep finished conversations DURATION (30d, 12h, 90m) before they are archived.

    A batch's rule wins over an agent's, an agent's over a label's (the shortest of them),
    and any of them over the global rule."""
    scope, name = _scope(agent, batch, label)
    rule = RetentionRule(scope, name, parse_retention(duration))
    with Client() as client:
        RetentionStore(client.redis, client.keys).set(rule)
    click.echo(f"{rule.field}: archived {_duration(rule.seconds)} after it finished")


@retention.command("unset")
@_scoped
def retention_unset(agent: str | None, batch: str | None, label: str | None) -> None:
    """Remove a rule (with no option: the global one)."""
    scope, name = _scope(agent, batch, label)
    with Client() as client:
        RetentionStore(client.redis, client.keys).unset(scope, name)
    click.echo(f"removed the retention rule for {scope.value}{':' + name if name else ''}")


@retention.command("list")
def retention_list() -> None:
    """Every rule."""
    with Client() as client:
        rules = RetentionStore(client.redis, client.keys).rules()
    if not rules:
        click.echo("no retention rules: every conversation stays in Redis")
    for rule in rules:
        click.echo(f"{rule.field}\t{_duration(rule.seconds)}")


@archive.command("run")
@click.option("--limit", type=click.IntRange(1, 1_000_000), default=1_000, show_default=True)
def run(limit: int) -> None:
    """One archive pass now (the scheduler runs one every SIGNOFF_ARCHIVE_INTERVAL_S)."""
    with Client() as client:
        done = _archiver(client).run_pass(limit=limit)
    click.echo(
        f"{len(done.archived)} archived, {len(done.failed)} not archived, "
        f"{done.audit_trimmed} audit entries trimmed"
    )
    for cid, why in done.failed.items():
        click.echo(f"  {cid}: {why}", err=True)
    if done.failed:
        sys.exit(1)


@archive.command("conversation")
@click.argument("conversation_id")
def archive_now(conversation_id: str) -> None:
    """Archive one finished conversation now, whatever its retention."""
    with Client() as client:
        archiver = _archiver(client)
        archiver.archive(conversation_id)
        click.echo(f"archived {conversation_id} to {archiver.storage.where(conversation_id)}")


@archive.command("export")
@click.argument("conversation_id")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here instead of standard output.",
)
def export(conversation_id: str, output: Path | None) -> None:
    """An archived conversation as JSON lines (its header, then one line per Redis key)."""
    with Client() as client:
        lines = _archiver(client).export_lines(conversation_id)
        if output is None:
            for line in lines:
                click.echo(line, nl=False)
            return
        with output.open("w", encoding="utf-8") as out:
            out.writelines(lines)
    click.echo(f"wrote {output}", err=True)


@archive.command("restore")
@click.argument("conversation_id")
def restore(conversation_id: str) -> None:
    """Bring an archived conversation back into Redis (its file stays)."""
    with Client() as client:
        _archiver(client).restore(conversation_id)
    click.echo(f"restored {conversation_id}")


@archive.command("list")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
def archived(limit: int) -> None:
    """The newest archived conversations, with when they were archived."""
    with Client() as client:
        found = _archiver(client).newest(limit)
    for cid, at in found:
        click.echo(f"{cid}\t{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(at))} UTC")
