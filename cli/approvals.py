"""`signoff approvals`: list, inspect and resolve the approvals waiting for a person.

Every resolution goes through `NotificationStore.resolve`, so the CLI gets the same
validation and the same first-resolution-wins conflicts as the web UI and the API.
`allow` and `deny` with --batch, --tool or --all resolve in bulk (`bulk_approvals.py`).
"""

from __future__ import annotations

import getpass
import json
import re
import sys
import time
from datetime import datetime
from typing import IO, Any

import click
from rich.console import Console
from rich.table import Table

from cli.approver import resolve_as
from cli.bulk_approvals import bulk_filter, bulk_options, bulk_resolve
from shared.client import Client
from shared.errors import InvalidInput
from shared.models.notifications import Notification
from shared.models.pending import PendingFilter
from shared.models.steps import Step

__all__ = [
    "approvals",
    "cli_actor",
    "notification_lines",
    "parse_duration",
    "parse_json",
    "step_line",
]

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_ACTOR_NAME = re.compile(r"^[\w.@-]{1,64}$")
_SUMMARY_CHARS = 60


# Pure helpers (also used by `signoff chat`)


def parse_duration(text: str) -> float:
    """Seconds in `30s`, `10m`, `2h`, `1d`, `1h30m`, or a bare number of seconds."""
    value = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ValueError(f"{text!r} is not a duration like 30s, 10m, 2h, 1d or 1h30m")
    return sum(float(number) * _SECONDS_PER_UNIT[unit] for number, unit in parts)


def parse_json(text: str, *, option: str) -> Any:
    """Parses a JSON option; a syntax error names the option and says nothing was resolved."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{option} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}; "
            "nothing was resolved"
        ) from exc


def cli_actor(name: str | None = None) -> str:
    """`cli:<name>`: the name given with --as, else the operating-system user."""
    if name is None:
        try:
            name = getpass.getuser()
        except (KeyError, OSError):  # no user database entry, no LOGNAME/USER
            name = "unknown"
    if not _ACTOR_NAME.match(name):
        raise InvalidInput(f"--as {name!r} must be 1-64 letters, digits, or . _ @ -")
    return f"cli:{name}"


def ago(seconds: float) -> str:
    """A short human duration: 45s, 12m, 3h, 2d."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def expires_in(note: Notification, now: float) -> str:
    """How long a notification may still wait; `overdue` until the sweep expires it."""
    if note.expires_at is None:
        return "-"
    left = note.expires_at - now
    return ago(left) if left > 0 else "overdue"


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="seconds")


def _pretty(value: Any) -> list[str]:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True).splitlines()


def _summary(note: Notification) -> str:
    text = note.question or (json.dumps(note.tool_call.args) if note.tool_call else note.title)
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 1] + "…"


def notification_lines(note: Notification, *, now: float | None = None) -> list[str]:
    """Everything about one notification as plain lines: what, where, arguments, outcome."""
    now = time.time() if now is None else now
    lines = [
        f"notification {note.id} ({note.status.value})",
        f"title:        {note.title}",
        f"conversation: {note.conversation_id}  turn: {note.turn_id}  "
        f"batch: {note.batch_id or '-'}",
        f"created:      {_when(note.created_at)} ({ago(now - note.created_at)} ago)",
    ]
    if note.expires_at is not None:
        left = expires_in(note, now)
        left = left if left == "overdue" else f"in {left}"
        lines.append(f"expires:      {_when(note.expires_at)} ({left})")
    lines.append(f"answers:      {', '.join(kind.value for kind in note.allowed)}")
    if note.tool_call is not None:
        lines.append(f"tool:         {note.tool_call.name}")
    if note.tool_call is not None and not note.question:  # a question's arguments are below
        lines += ["arguments:", *_pretty(note.tool_call.args)]
    if note.question:
        lines.append(f"question:     {note.question}")
    if note.submit_schema is not None:
        lines += ["answer schema:", *_pretty(note.submit_schema)]
    lines += _outcome_lines(note)
    return lines


def _outcome_lines(note: Notification) -> list[str]:
    if note.resolution is None:
        return []
    who = f"by {note.resolved_by or '?'}"
    when = f" at {_when(note.resolved_at)}" if note.resolved_at else ""
    return [
        f"resolution:   {note.resolution.kind} {who}{when}",
        *_pretty(note.resolution.model_dump(exclude={"kind"}, exclude_none=True)),
    ]


def step_line(step: Step, *, width: int = 160) -> str:
    """One history step on one line: position, type, source, and what it says or calls."""
    calls = ", ".join(
        f"{c.name}({json.dumps(c.args, ensure_ascii=False)})" for c in step.tool_calls
    )
    text = " ".join((step.error or step.content or calls).split())
    line = f"#{step.step_index} {step.type.value} ({step.source.value}, {step.status.value}) {text}"
    return line if len(line) <= width else line[: width - 1] + "…"


# Output


def _console() -> Console:
    """Rich output; piped output gets a wide, colourless table so ids are never cut."""
    if sys.stdout.isatty():
        return Console()
    return Console(width=240, no_color=True, highlight=False)


def _table(notes: list[Notification]) -> Table:
    table = Table()
    table.add_column("id", no_wrap=True)
    table.add_column("tool", no_wrap=True)
    table.add_column("batch", no_wrap=True)
    table.add_column("age", justify="right", no_wrap=True)
    table.add_column("expires in", justify="right", no_wrap=True)
    table.add_column("request", overflow="ellipsis")
    now = time.time()
    for note in notes:
        table.add_row(
            note.id,
            note.tool_name or "-",
            note.batch_id or "-",
            ago(now - note.created_at),
            expires_in(note, now),
            _summary(note),
        )
    return table


def _caption(offset: int, shown: int, total: int | None) -> str:
    if shown == 0:
        return "no pending approvals match" if offset == 0 else f"none past offset {offset}"
    span = f"{offset + 1}-{offset + shown}"
    return f"{span} of {total} pending" if total is not None else f"{span} (filtered)"


def _done(verb: str, note: Notification) -> None:
    click.echo(f"{verb} {note.id} as {note.resolved_by}; the turn resumes on a worker")


# Commands


@click.group()
def approvals() -> None:
    """Approvals waiting for a person: list, show, allow, deny, submit."""


actor_option = click.option(
    "--as",
    "as_name",
    default=None,
    metavar="NAME",
    help="Record NAME (as cli:NAME); an account's name resolves within its role and scopes.",
)


@approvals.command("list")
@click.option("--tool", default=None, help="Only calls of this tool.")
@click.option("--batch", "batch_id", default=None, help="Only this batch.")
@click.option("--conversation", "conversation_id", default=None, help="Only this conversation.")
@click.option(
    "--older-than",
    "older_than",
    default=None,
    metavar="DURATION",
    help="Only those waiting longer than this (30s, 10m, 2h, 1d).",
)
@click.option("--offset", default=0, type=click.IntRange(min=0), show_default=True)
@click.option("--limit", default=50, type=click.IntRange(1, 1000), show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def list_command(
    tool: str | None,
    batch_id: str | None,
    conversation_id: str | None,
    older_than: str | None,
    offset: int,
    limit: int,
    as_json: bool,
) -> None:
    """Pending approvals, oldest first."""
    try:
        min_age_s = None if older_than is None else parse_duration(older_than)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--older-than'") from exc
    where = PendingFilter(
        tool=tool, batch_id=batch_id, conversation_id=conversation_id, min_age_s=min_age_s
    )
    with Client() as client:
        store = client.notifications
        notes = store.pending(where, offset=offset, limit=limit)
        # The count comes from one index, so it is exact only with at most one filter.
        total = store.count_pending(where) if where.facets <= 1 else None
    if as_json:
        for note in notes:
            click.echo(note.model_dump_json())
        return
    if notes:
        _console().print(_table(notes))
    click.echo(_caption(offset, len(notes), total))


@approvals.command()
@click.argument("notification_id")
@click.option(
    "--context", "context_steps", default=5, type=click.IntRange(0, 100), show_default=True
)
@click.option("--json", "as_json", is_flag=True, help="The notification and its context as JSON.")
def show(notification_id: str, context_steps: int, as_json: bool) -> None:
    """Everything about one notification, with the conversation's last steps."""
    with Client() as client:
        note = client.notifications.get(notification_id)
        history = client.conversation(note.conversation_id).history
    recent = history[-context_steps:] if context_steps else []
    if as_json:
        context = [step.model_dump(mode="json", exclude_defaults=True) for step in recent]
        click.echo(json.dumps({"notification": note.model_dump(mode="json"), "context": context}))
        return
    click.echo("\n".join(notification_lines(note)))
    if recent:
        click.echo(f"last {len(recent)} steps of the conversation:")
        click.echo("\n".join(f"  {step_line(step)}" for step in recent))


@approvals.command()
@click.argument("notification_id", required=False)
@click.option("--args", "args_json", default=None, metavar="JSON", help="Run with these instead.")
@click.option(
    "--sticky",
    type=click.Choice(["conversation", "batch"]),
    default=None,
    help="Also allow this tool for the rest of the conversation or batch.",
)
@bulk_options
@actor_option
def allow(
    notification_id: str | None,
    args_json: str | None,
    sticky: str | None,
    batch_id: str | None,
    tool: str | None,
    every: bool,
    yes: bool,
    as_name: str | None,
) -> None:
    """Run the tool call (with edited arguments if --args is given), or every one matched."""
    selection = bulk_filter(notification_id, batch_id, tool, every)
    actor = cli_actor(as_name)
    arguments = None if args_json is None else parse_json(args_json, option="--args")
    resolution = {"kind": "allow", "arguments": arguments, "sticky": sticky}
    if selection is not None:
        if arguments is not None or sticky:
            raise click.UsageError("--args and --sticky concern one call: give a NOTIFICATION_ID")
        bulk_resolve(selection, resolution, verb="allowed", yes=yes, actor=actor, as_name=as_name)
        return
    with Client() as client:
        note = resolve_as(client, str(notification_id), resolution, actor=actor, as_name=as_name)
    _done("allowed", note)


@approvals.command()
@click.argument("notification_id", required=False)
@click.option("--reason", required=True, help="Why; the model is told.")
@bulk_options
@actor_option
def deny(
    notification_id: str | None,
    reason: str,
    batch_id: str | None,
    tool: str | None,
    every: bool,
    yes: bool,
    as_name: str | None,
) -> None:
    """Refuse the tool call or question, or every one matched; the model is told the reason."""
    selection = bulk_filter(notification_id, batch_id, tool, every)
    actor = cli_actor(as_name)
    resolution = {"kind": "deny", "reason": reason}
    if selection is not None:
        bulk_resolve(selection, resolution, verb="denied", yes=yes, actor=actor, as_name=as_name)
        return
    with Client() as client:
        note = resolve_as(client, str(notification_id), resolution, actor=actor, as_name=as_name)
    _done("denied", note)


@approvals.command()
@click.argument("notification_id")
@click.option("--json", "json_text", default=None, metavar="JSON", help="The answer as JSON.")
@click.option(
    "--file",
    "json_file",
    type=click.File("r", encoding="utf-8"),
    default=None,
    help="Read the JSON answer from a file ('-': stdin).",
)
@actor_option
def submit(
    notification_id: str, json_text: str | None, json_file: IO[str] | None, as_name: str | None
) -> None:
    """Answer a question with content valid against its schema."""
    if (json_text is None) == (json_file is None):
        raise click.UsageError("give the answer with exactly one of --json JSON or --file PATH")
    actor = cli_actor(as_name)
    if json_file is not None:
        content = parse_json(json_file.read(), option=f"--file {json_file.name}")
    else:
        content = parse_json(str(json_text), option="--json")
    resolution = {"kind": "submit", "content": content}
    with Client() as client:
        note = resolve_as(client, notification_id, resolution, actor=actor, as_name=as_name)
    _done("submitted", note)
