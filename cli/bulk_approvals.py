"""`signoff approvals allow|deny --batch/--tool/--all`: resolving in bulk, as the web does.

The count is shown and confirmed first (`--yes`, or a terminal to ask on); the
resolution itself is `shared/store/bulk.py`'s, pinned to what was counted.
"""

from __future__ import annotations

import sys
from typing import Any

import click
from pydantic import ValidationError

from cli.approver import account_check
from shared.client import Client
from shared.errors import InvalidInput
from shared.models.notifications import RESOLUTION
from shared.models.pending import PendingFilter
from shared.store.bulk import (
    BULK_LIMIT,
    BulkScope,
    CountChanged,
    TooMany,
    counted,
    resolve_matching,
)

__all__ = ["bulk_filter", "bulk_options", "bulk_resolve"]


def bulk_options(command: Any) -> Any:
    """--batch, --tool, --all and --yes: resolve every pending notification they match."""
    for option in reversed(
        (
            click.option("--batch", "batch_id", default=None, help="Every pending one of a batch."),
            click.option("--tool", default=None, help="Every pending call of this tool."),
            click.option("--all", "every", is_flag=True, help="Every pending notification."),
            click.option("--yes", is_flag=True, help="Do not ask to confirm the count."),
        )
    ):
        command = option(command)
    return command


def bulk_filter(
    notification_id: str | None, batch_id: str | None, tool: str | None, every: bool
) -> PendingFilter | None:
    """The filter of a bulk resolution, or None for one NOTIFICATION_ID; exactly one is given."""
    filtered = every or batch_id is not None or tool is not None
    if filtered == (notification_id is not None):
        raise click.UsageError("give a NOTIFICATION_ID, or --batch/--tool/--all (not both)")
    return PendingFilter(tool=tool, batch_id=batch_id) if filtered else None


_QUESTIONS = {"allowed": "Allow", "denied": "Deny"}  # the verb of the report, as the question's


def bulk_resolve(
    selection: PendingFilter,
    resolution: dict[str, Any],
    *,
    verb: str,
    yes: bool,
    actor: str,
    as_name: str | None = None,
) -> None:
    """Counts, asks to confirm that count, then resolves what the count covered."""
    try:
        decision = RESOLUTION.validate_python(resolution)
    except ValidationError as exc:
        raise InvalidInput(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None
    with Client() as client:
        store = client.notifications
        check = account_check(client, as_name)
        scope = BulkScope.pin(selection)
        try:
            count = counted(store, scope)
        except TooMany as exc:
            raise click.ClickException(
                f"{exc.count} match; at most {BULK_LIMIT:,} at once: narrow it"
            ) from None
        if count == 0:
            click.echo("no pending approvals match")
            return
        click.echo(f"{count} pending approvals match")
        _confirm(f"{_QUESTIONS[verb]} all {count}?", yes=yes)
        try:
            outcome = resolve_matching(
                store,
                scope,
                decision,
                expected=count,
                actor=actor,
                check=check,
                audit_scope=check.audit_scope if check is not None else "",
            )
        except CountChanged as exc:
            raise click.ClickException(
                f"{exc.current} match now, not {exc.expected}; nothing was resolved: run it again"
            ) from None
    click.echo(
        f"{verb} {outcome.resolved}, already resolved {outcome.conflicts}"
        + (f", not possible {outcome.not_applicable}" if outcome.not_applicable else "")
        + (f", moved meanwhile {outcome.left_pending}" if outcome.left_pending else "")
    )


def _confirm(question: str, *, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        click.echo(
            "no terminal to confirm on: pass --yes to resolve them; nothing resolved", err=True
        )
        raise SystemExit(1)
    click.confirm(question, abort=True)
