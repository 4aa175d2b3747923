"""`signoff batch`: run a file of prompts as a batch, watch it, retry what ended badly, re-run
it with another agent or model, and collect its results."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cli.batch_input import BatchFile, InputFormat, read_template
from cli.model_settings import model_settings_from, model_settings_options
from cli.retry import RedisRetry
from shared.batches.export import export_lines
from shared.client import Client
from shared.errors import InvalidInput
from shared.models.batches import (
    BatchConfig,
    BatchState,
    BatchStatus,
    ExportFormat,
)
from shared.models.config import ConversationOptions
from shared.models.prices import format_cost
from shared.schema import check_schema
from shared.settings import Settings
from shared.store.agents import resolve_options
from shared.store.batches import BatchInfo, BatchStore, SubmitReport
from shared.store.conversations import new_id
from shared.validation import conversation_options

__all__ = ["batch"]

_err = Console(stderr=True, soft_wrap=True)  # a path in a message is never cut in two


@click.group()
def batch() -> None:
    """Run many prompts as a batch: one conversation each, one configuration for all."""


def store_for(client: Client) -> BatchStore:
    return BatchStore(client.redis, client.keys, client.settings, client.tasks)


@batch.command("run")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write one result line per input line, in input order.",
)
@click.option("--provider", default=None, help="Provider (default: SIGNOFF_PROVIDER).")
@click.option("--model", default=None, help="Model (default: SIGNOFF_MODEL).")
@click.option("--system-prompt", default="", help="System prompt for every conversation.")
@click.option("--allow-all", is_flag=True, help="Run every tool without asking.")
@click.option("--agent", default=None, help="Every item runs as this named agent.")
@click.option(
    "--tools", "tools_json", default=None, help='Tool policies as JSON, e.g. {"send_email": "ask"}.'
)
@click.option(
    "--schema",
    "schema_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="JSON schema every answer must satisfy.",
)
@click.option("--max-concurrency", type=click.IntRange(1, 10_000), default=16, show_default=True)
@click.option(
    "--id", "batch_id", default=None, help="Batch id (default: resume OUT's batch, or a new one)."
)
@click.option(
    "--no-wait", is_flag=True, help="Submit and return; collect later with `batch results`."
)
@click.option(
    "--input-format",
    type=click.Choice([f.value for f in InputFormat]),
    default=None,
    help="How PATH is read (default: csv for a .csv file, else jsonl).",
)
@click.option(
    "--template",
    default=None,
    help="CSV input: each row's prompt, naming columns, as 'Classify: {subject}\\n{body}' "
    "(\\n, \\t: newline, tab); @FILE reads it from a file. Without it, the 'prompt' column.",
)
@model_settings_options
def run(
    path: Path,
    out: Path,
    provider: str | None,
    model: str | None,
    system_prompt: str,
    allow_all: bool,
    agent: str | None,
    tools_json: str | None,
    schema_path: Path | None,
    max_concurrency: int,
    batch_id: str | None,
    no_wait: bool,
    input_format: str | None,
    template: str | None,
    **settings: Any,
) -> None:
    """Submit PATH, show progress, write results.

    PATH is JSONL ({"id": ..., "prompt": ...} per line) or CSV (a header row; an `id` column
    if you like, and a `prompt` column or a --template naming columns). A CSV file is checked
    whole first: a row without a value for a column refuses it, and nothing is queued.
    Interrupted (Ctrl-C), the batch goes on in the background; the same command resumes:
    items already submitted are skipped.
    """
    source = BatchFile(
        path,
        InputFormat.of(path, input_format),
        read_template(template) if template is not None else None,
    )
    options = _options(provider, model, system_prompt, allow_all, tools_json, schema_path, agent)
    chosen = model_settings_from(settings)
    if chosen is not None:
        options = conversation_options(
            **options.model_dump(exclude_unset=True), model_settings=chosen
        )
    state_file = out.with_name(out.name + ".batch")
    with Client() as client:
        # the CLI holds the Redis credentials: it speaks for the operator
        config = resolve_options(
            options, client.settings, policy_may_loosen=True, agents=client.stores.agents
        )
        store = store_for(client)
        retry = retrying(client.settings)
        bid = batch_id or (state_file.read_text().strip() if state_file.exists() else new_id()[:16])
        batch_config = BatchConfig(conversation=config, max_concurrency=max_concurrency)
        retry(lambda: store.create(batch_config, batch_id=bid), f"creating batch {bid}")
        state_file.write_text(bid + "\n")
        _err.print(f"batch [bold]{bid}[/] from {path}")
        report = SubmitReport()
        submitting = f"submitting batch {bid}"
        retry(lambda: store.submit(bid, source.lines(client.settings), report), submitting)
        retry(lambda: store.finish_submission(bid), submitting)
        for line, problem in report.invalid:
            _err.print(f"[yellow]skipped line {line}[/]: {problem}")
        _err.print(
            f"submitted {report.submitted}, already there {report.skipped}, "
            f"invalid {len(report.invalid)}"
        )
        if no_wait:
            click.echo(bid)
            return
        try:
            info = watch(store, bid, client.settings, retry=retry)
        except KeyboardInterrupt:
            _err.print(f"\ninterrupted: batch {bid} goes on; run the same command to resume")
            raise SystemExit(130) from None
        written = retry(lambda: write_results(store, bid, out), f"writing results to {out}")
        _err.print(f"wrote {written.lines} results to {out}")
        if info.status is BatchStatus.CANCELLED:
            raise SystemExit(1)
        failures = failure_text(info, denied=written.denied)
        if failures:
            _err.print(f"[red]{failures}[/]; see {out}")
            raise SystemExit(1)


def _options(
    provider: str | None,
    model: str | None,
    system_prompt: str,
    allow_all: bool,
    tools_json: str | None,
    schema_path: Path | None,
    agent: str | None,
) -> ConversationOptions:
    tools = _json_option("--tools", tools_json) if tools_json else None
    schema = (
        check_schema(_json_option("--schema", schema_path.read_text()), name="--schema")
        if schema_path
        else None
    )
    return conversation_options(
        provider=provider,
        model=model,
        system_prompt=system_prompt,
        allow_all=allow_all,
        tools=tools,
        response_schema=schema,
        agent=agent,
    )


def _json_option(name: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name} is not valid JSON: {exc}") from exc


def retrying(settings: Settings) -> RedisRetry:
    """Retries steps while Redis is away, saying so on stderr, up to SIGNOFF_REDIS_RETRY_S."""
    return RedisRetry(settings.redis_retry_s, lambda line: _err.print(f"[yellow]{line}[/]"))


def watch(
    store: BatchStore,
    bid: str,
    settings: Settings,
    *,
    retry: RedisRetry | None = None,
    interval_s: float = 0.5,
) -> BatchInfo:
    """A progress bar with the counts until every item has finished.

    Each look also finishes any dispatch a process left half done (see `BatchStore.dispatch`).
    """
    retry = retry or retrying(settings)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=_err, transient=False) as progress:
        task = progress.add_task(bid, total=None, counts="")
        hinted = False
        while True:
            info = retry(lambda: _look(store, bid), f"following batch {bid}")
            progress.update(
                task, total=info.total, completed=info.finished, counts=counts_text(info)
            )
            hinted = _hint_approvals(progress, info, settings, hinted)
            if info.status in (BatchStatus.DONE, BatchStatus.CANCELLED):
                return info
            time.sleep(interval_s)


def _look(store: BatchStore, bid: str) -> BatchInfo:
    store.dispatch(bid)
    return store.info(bid)


def _hint_approvals(progress: Progress, info: BatchInfo, settings: Settings, hinted: bool) -> bool:
    """Says where to resolve approvals when some appear, and once more when none are left."""
    waiting = info.counts[BatchState.WAITING]
    if waiting and not hinted:
        url = f"http://{settings.web_host}:{settings.web_port}/approvals?batch={info.batch_id}"
        progress.console.print(
            f"[cyan]{waiting} waiting for approval[/]: resolve them at {url} "
            f"or with `signoff approvals list --batch {info.batch_id}`"
        )
    elif hinted and not waiting:
        progress.console.print("[cyan]no approvals pending[/]")
    return bool(waiting)


# Items that did not succeed, for the exit status: invalid lines were already reported
# (and skipped) at submission, so they do not fail the run; an item whose tool call an
# operator denied ends `done` but did not do what it was asked, so it does.
FAILURE_STATES = (BatchState.FAILED, BatchState.CANCELLED)


def failure_text(info: BatchInfo, *, denied: int = 0) -> str:
    """How many items failed, as in `3 of 200 items failed (failed 2, denied 1)`; or nothing."""
    counts = {state.value: info.counts[state] for state in FAILURE_STATES}
    counts["denied"] = denied
    shown = {name: n for name, n in counts.items() if n}
    if not shown:
        return ""
    detail = ", ".join(f"{name} {n}" for name, n in shown.items())
    return f"{sum(shown.values())} of {info.total} items failed ({detail})"


def counts_text(info: BatchInfo) -> str:
    shown = [
        BatchState.QUEUED,
        BatchState.RUNNING,
        BatchState.WAITING,
        BatchState.DONE,
        BatchState.FAILED,
        BatchState.CANCELLED,
        BatchState.INVALID,
    ]
    text = " ".join(f"{state.value} {info.counts[state]}" for state in shown if info.counts[state])
    return f"{text} {held_text(info)}".strip()


def held_text(info: BatchInfo) -> str:
    """Why nothing dispatches, when its budget is spent; empty otherwise."""
    if not info.held:
        return ""
    unit = "money" if info.held.endswith("micros") else "tokens"
    return (
        f"[held: its {unit} budget is spent; raise it (`signoff budget set batch "
        f"{info.batch_id}`) to go on]"
    )


class Written(NamedTuple):
    """Result lines written, and how many of them had a tool call denied."""

    lines: int
    denied: int


def write_results(
    store: BatchStore, bid: str, out: Path, fmt: ExportFormat = ExportFormat.JSONL
) -> Written:
    """Writes the results in input order via a temporary file: a crash leaves no half file."""
    partial = out.with_name(out.name + ".partial")
    counted = _Counted(store.results(bid))
    newline = "" if fmt is ExportFormat.CSV else None  # CSV records end in CRLF as written
    with partial.open("w", encoding="utf-8", newline=newline) as sink:
        sink.writelines(export_lines(counted, fmt, schema=_schema(store, bid)))
    partial.replace(out)
    return Written(counted.lines, counted.denied)


def _schema(store: BatchStore, bid: str) -> Any:
    return store.config(bid).conversation.response_schema


class _Counted:
    """Results passed through, counting them and those done with a tool call denied."""

    def __init__(self, results: Iterable[dict[str, Any]]) -> None:
        self._results = results
        self.lines = self.denied = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for result in self._results:
            self.lines += 1
            self.denied += result["status"] == BatchState.DONE.value and result["denied"] > 0
            yield result


@batch.command("status")
@click.argument("batch_id")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(batch_id: str, as_json: bool) -> None:
    """Counts and usage of a batch."""
    with Client() as client:
        store = store_for(client)
        info = retrying(client.settings)(lambda: store.info(batch_id), f"reading batch {batch_id}")
    if as_json:
        click.echo(
            json.dumps(
                {
                    "batch_id": info.batch_id,
                    "status": info.status.value,
                    "total": info.total,
                    "counts": {s.value: n for s, n in info.counts.items()},
                    "usage": info.usage.model_dump(),
                    "rest_cost_micros": info.rest_cost_micros,
                    "held": info.held or None,
                    "source": info.source or None,
                    "retries": info.retries,
                }
            )
        )
        return
    lineage = f" (re-run of {info.source})" if info.source else ""
    lineage += f" (retried {info.retries}x)" if info.retries else ""
    click.echo(
        f"{info.batch_id}{lineage}: {info.status.value}, {info.finished}/{info.total} finished; "
        f"{counts_text(info)}; {info.usage.total_token_count} tokens; "
        f"cost {format_cost(info.usage)}{_rest_cost(info)}"
    )


def _rest_cost(info: BatchInfo) -> str:
    """What the items still to end would cost at the mean of those that ran, if known."""
    rest = info.rest_cost_micros
    return "" if not rest else f", about {rest / 1_000_000:g} more for the rest"


@batch.command("cancel")
@click.argument("batch_id")
def cancel(batch_id: str) -> None:
    """Cancel a batch: queued prompts at once, running and waiting ones are aborted."""
    with Client() as client:
        store = store_for(client)
        retry = retrying(client.settings)
        touched = retry(lambda: store.cancel(batch_id), f"cancelling batch {batch_id}")
    click.echo(f"cancelled batch {batch_id} ({touched} conversations stopped)")


@batch.command("results")
@click.argument("batch_id")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file instead of standard output.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice([f.value for f in ExportFormat]),
    default=ExportFormat.JSONL.value,
    show_default=True,
    help="jsonl: one JSON object per item; csv: a header, then one row per item, "
    "structured fields flattened into structured.<path> columns.",
)
def results(batch_id: str, out: Path | None, fmt: str) -> None:
    """The results in input order, one per item (finished or not), as JSON lines or CSV."""
    chosen = ExportFormat(fmt)
    with Client() as client:
        store = store_for(client)
        retry = retrying(client.settings)
        if out is not None:
            written = retry(lambda: write_results(store, batch_id, out, chosen), f"writing {out}")
            click.echo(f"wrote {written.lines} results to {out}", err=True)
            return
        printed = [0]  # a retry goes on from the first line not yet printed
        reading = f"reading batch {batch_id}"
        retry(lambda: _print_results(store, batch_id, chosen, printed), reading)


def _print_results(store: BatchStore, bid: str, fmt: ExportFormat, printed: list[int]) -> None:
    """Prints the lines from the first not yet printed (a CSV's header counts as one)."""
    lines = export_lines(store.results(bid), fmt, schema=_schema(store, bid))
    for line in islice(lines, printed[0], None):
        click.echo(line, nl=False)
        printed[0] += 1


@batch.command("list")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
def list_batches(limit: int) -> None:
    """The most recent batches."""
    with Client() as client:
        store = store_for(client)
        for bid in store.ids(limit=limit):
            info = store.info(bid)
            click.echo(
                f"{bid}  {info.status.value:<10} {info.finished}/{info.total}  {counts_text(info)}"
            )
