"""`signoff batch retry`, `rerun` and `compare`: a batch's items run again, as new attempts of
the same items or as a new batch with another agent, model or settings, and two runs compared."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.batch import failure_text, retrying, store_for, watch
from cli.model_settings import model_settings_from, model_settings_options
from shared.batches.compare import compare_csv_lines
from shared.client import Client
from shared.errors import InvalidInput
from shared.models.batches import CompareShow, RerunChanges, RetryFilter, RetryStatus
from shared.models.prices import format_cost
from shared.models.steps import UsageMetadata
from shared.store.batch_retry import BatchRetry
from shared.store.comparisons import BatchComparison
from shared.store.reruns import BatchRerun
from shared.validation import checked_options

__all__ = ["compare", "rerun", "retry"]

_err = Console(stderr=True, soft_wrap=True)


@click.command("retry")
@click.argument("batch_id")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice([s.value for s in RetryStatus]),
    help="Only items that failed, were cancelled, had a tool call denied, or whose approval "
    "expired (repeat for several; default: all four).",
)
@click.option("--error", default=None, help="Only items whose error (or denial) holds TEXT.")
@click.option("--tool", default=None, help="Only items whose turn called this tool.")
@click.option("--item", "items", multiple=True, help="Only this item, by id (repeat for more).")
@click.option("--wait", is_flag=True, help="Show progress until the batch has ended again.")
def retry(
    batch_id: str,
    statuses: tuple[str, ...],
    error: str | None,
    tool: str | None,
    items: tuple[str, ...],
    wait: bool,
) -> None:
    """Run a batch's ended items again, each as a new attempt, under its cap and budget."""
    chosen = checked_options(
        RetryFilter,
        "retry",
        {
            "statuses": frozenset(map(RetryStatus, statuses)) or frozenset(RetryStatus),
            "error": error,
            "tool": tool,
            "items": frozenset(items) or None,
        },
    )
    with Client() as client:
        store = store_for(client)
        again = retrying(client.settings)
        report = again(lambda: BatchRetry(store).retry(batch_id, chosen), f"retrying {batch_id}")
        for item, why in report.skipped:
            _err.print(f"[yellow]not retried{f' {item}' if item else ''}[/]: {why}")
        if not report.retried:
            click.echo(f"nothing to retry in batch {batch_id}: no ended item matches")
            return
        click.echo(f"retrying {report.retried} items of batch {batch_id} as new attempts")
        if not wait:
            return
        info = watch(store, batch_id, client.settings, retry=again)
    failures = failure_text(info)
    if failures:
        _err.print(f"[red]{failures}[/]; see `signoff batch results {batch_id}`")
        raise SystemExit(1)


@click.command("rerun")
@click.argument("batch_id")
@click.option("--agent", default=None, help="Run as this agent: NAME, or NAME@VERSION.")
@click.option(
    "--agent-version",
    type=click.IntRange(1),
    default=None,
    help="Run as this version of the source's agent.",
)
@click.option("--provider", default=None, help="Run on this provider instead.")
@click.option("--model", default=None, help="Run on this model instead.")
@click.option("--max-concurrency", type=click.IntRange(1, 10_000), default=None)
@click.option("--id", "new_id_", default=None, help="The re-run's id (again: resume it).")
@click.option("--wait", is_flag=True, help="Show progress until the re-run has ended.")
@model_settings_options
def rerun(
    batch_id: str,
    agent: str | None,
    agent_version: int | None,
    provider: str | None,
    model: str | None,
    max_concurrency: int | None,
    new_id_: str | None,
    wait: bool,
    **settings: Any,
) -> None:
    """Run BATCH_ID's inputs again as a new batch, with another agent, model or settings."""
    name, version = _agent_ref(agent, agent_version)
    chosen: dict[str, Any] = {"agent": name, "agent_version": version}
    chosen |= {"provider": provider, "model": model}
    chosen |= {"model_settings": model_settings_from(settings), "max_concurrency": max_concurrency}
    changes = checked_options(RerunChanges, "re-run", chosen)
    with Client() as client:
        store, again = store_for(client), retrying(client.settings)
        runs = BatchRerun(store, client.stores.agents)
        bid, report = again(
            lambda: runs.rerun(batch_id, changes, batch_id=new_id_), f"re-running {batch_id}"
        )
        _err.print(
            f"batch [bold]{bid}[/] re-runs {batch_id}: submitted {report.submitted}, "
            f"already there {report.skipped}, invalid in the source {len(report.invalid)}"
        )
        click.echo(bid)
        if wait:
            info = watch(store, bid, client.settings, retry=again)
            if failures := failure_text(info):
                _err.print(f"[red]{failures}[/]; see `signoff batch results {bid}`")
                raise SystemExit(1)


def _agent_ref(agent: str | None, version: int | None) -> tuple[str | None, int | None]:
    """`NAME@VERSION` as its two parts; a version given both ways must agree."""
    if agent is None or "@" not in agent:
        return agent, version
    name, _, number = agent.rpartition("@")
    if not name or not number.isdigit() or int(number) < 1:
        raise InvalidInput(f"--agent {agent!r}: write NAME or NAME@VERSION (a number from 1)")
    if version is not None and version != int(number):
        raise InvalidInput(f"--agent {agent!r} and --agent-version {version} disagree")
    return name, int(number)


@click.command("compare")
@click.argument("first")
@click.argument("second")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "jsonl", "csv"]),
    default="table",
    show_default=True,
    help="table: the summary, then the items; jsonl, csv: the items (the summary on stderr).",
)
@click.option(
    "--show",
    type=click.Choice([s.value for s in CompareShow]),
    default=None,
    help="Only items of this outcome; changed: the answers differ or only one run succeeded "
    "(default: every item, or changed ones for the table).",
)
def compare(first: str, second: str, fmt: str, show: str | None) -> None:
    """Compare two runs of the same inputs (a re-run and its source) item by item."""
    chosen = CompareShow(show) if show else (CompareShow.CHANGED if fmt == "table" else None)
    with Client() as client:
        comparison = BatchComparison(store_for(client), first, second)
        comparison.check_aligned()
        if fmt == "table":
            _print_summary(comparison.summary(), click.echo)
            _print_table(comparison.items(chosen))
            return
        items = comparison.items(chosen)
        lines = compare_csv_lines(items) if fmt == "csv" else map(_json_line, items)
        for line in lines:
            click.echo(line, nl=False)
        _print_summary(comparison.summary(), lambda text: click.echo(text, err=True))


def _json_line(compared: dict[str, Any]) -> str:
    return json.dumps(compared, ensure_ascii=False) + "\n"


def _print_summary(summary: dict[str, Any], say: Callable[[str], None]) -> None:
    outcomes = summary["outcomes"]
    say(
        f"{summary['total']} items: both succeeded and agree {outcomes['agree']}, differ "
        f"{outcomes['differ']}; only the first succeeded {outcomes['only_first']}, only the "
        f"second {outcomes['only_second']}; neither {outcomes['neither']}"
    )
    for side in ("first", "second"):
        run = summary["batches"][side]
        cost = format_cost(UsageMetadata.model_validate(run["usage"]))
        say(f"  {side} {run['id']}: {run['status']}, {summary['tokens'][side]} tokens, cost {cost}")
    for name, rate in summary["fields"].items():
        say(f"  {name}: agree {rate['agree']}/{rate['compared']} ({rate['rate']:.0%})")


def _print_table(items: Iterable[dict[str, Any]]) -> None:
    table = Table("item", "outcome", "first", "second", "answer: removed / added", box=None)
    for compared in items:
        removed = " ".join(text for op, text in compared["answer_diff"] if op == "-")
        added = " ".join(text for op, text in compared["answer_diff"] if op == "+")
        table.add_row(
            compared["id"],
            compared["outcome"],
            escape(_side(compared["first"])),
            escape(_side(compared["second"])),
            f"[red]{escape(removed[:80])}[/] / [green]{escape(added[:80])}[/]",
        )
    Console(soft_wrap=True).print(table)


def _side(side: dict[str, Any]) -> str:
    """A side's status, its tool calls by name (? when its turn left no answer to read them
    from) and its duration: `done, calls get_time, 1.2 s`."""
    calls = side["tool_calls"]
    named = "?" if calls is None else ",".join(calls) or "none"
    took = "" if side["duration_s"] is None else f", {side['duration_s']:.1f} s"
    return f"{side['status']}, calls {named}{took}"
