"""`signoff usage`: tokens and cost by day, model, agent, batch and owner over UTC days, or as
CSV."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

from shared.client import Client
from shared.models.prices import format_cost
from shared.models.steps import UsageMetadata
from shared.usage_report import UsageKind, read_usage_report, usage_csv

__all__ = ["usage"]

_KINDS = [kind.value for kind in UsageKind]


@click.command()
@click.option("--days", type=click.IntRange(1, 366), default=7, show_default=True)
@click.option(
    "--by",
    "kinds",
    type=click.Choice(_KINDS),
    multiple=True,
    help="Break down by this (repeatable); default: day, model, agent, batch and owner.",
)
@click.option("--csv", "as_csv", is_flag=True, help="A row per day and name of each breakdown.")
def usage(days: int, kinds: tuple[str, ...], as_csv: bool) -> None:
    """Tokens and cost of the last DAYS UTC days, by day, model, agent, batch and owner (the
    user or API token that submitted the calls)."""
    end = datetime.now(UTC).date()
    start = end - timedelta(days=days - 1)
    chosen = [UsageKind(kind) for kind in kinds] or list(UsageKind)
    with Client() as client:
        report = read_usage_report(client.redis, client.keys, start=start, end=end)
    if as_csv:
        click.echo(usage_csv(report, chosen), nl=False)
        return
    click.echo(f"{start.isoformat()} to {end.isoformat()} (UTC)")
    for kind in chosen:
        click.echo(f"by {kind.value}:")
        totals = report.by(kind)
        for name, found in totals.items():
            click.echo(f"  {name}\t{_figures(found)}")
        if not totals:
            click.echo("  no usage")


def _figures(found: UsageMetadata) -> str:
    estimated = f" ({found.estimated_calls} calls estimated)" if found.estimated_calls else ""
    return f"{found.total_token_count} tokens\tcost {format_cost(found)}{estimated}"
