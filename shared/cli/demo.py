"""`signoff up --demo`: a small batch on the offline model; some prompts need an operator.

The demo runs once per data directory: `.signoff/demo-batch` keeps its id, and later starts
follow that batch (to its end, if it has not ended) instead of submitting it again.
"""

from __future__ import annotations

from pathlib import Path

import click

from shared.cli.batch import _lines, watch, write_results
from shared.cli.supervisor import Supervisor
from shared.client import Client
from shared.models.config import ConversationConfig
from shared.settings import Settings, load_settings
from shared.store.batches import BatchConfig, BatchStore

__all__ = ["run_demo"]

EXAMPLES = Path("examples/prompts.jsonl")
RESULTS = Path("results.jsonl")


def run_demo(supervisor: Supervisor, *, examples: Path = EXAMPLES, results: Path = RESULTS) -> None:
    """Runs the example prompts as a batch and writes results.jsonl once all are resolved."""
    settings = load_settings(redis_url=supervisor.redis_url, web_port=supervisor.web_port)
    with Client(settings) as client:
        store = BatchStore(client.redis, client.keys, settings, client.tasks)
        bid = supervisor.state.demo_batch()
        if bid is None:
            bid = _submit(store, settings, supervisor, examples)
        elif store.exists(bid):
            click.secho(f"demo: batch {bid} was submitted at an earlier start; following it")
        else:
            click.echo(
                f"demo: batch {bid} of an earlier start is gone from Redis; delete "
                f"{supervisor.state.root / 'demo-batch'} to run the demo again"
            )
            return
        _hint(supervisor, settings, bid)
        watch(store, bid, settings)
        written = write_results(store, bid, results)
    click.secho(
        f"demo: {written.lines} results written to {results}; Ctrl-C stops everything", fg="green"
    )


def _submit(store: BatchStore, settings: Settings, supervisor: Supervisor, examples: Path) -> str:
    bid = store.create(BatchConfig(conversation=ConversationConfig.from_settings(settings)))
    supervisor.state.remember_demo_batch(bid)  # before anything is queued: never submitted twice
    report = store.submit(bid, _lines(examples, settings))
    store.finish_submission(bid)
    click.secho(
        f"demo: batch {bid} runs {report.submitted} prompts from {examples} on the demo model",
        fg="green",
    )
    return bid


def _hint(supervisor: Supervisor, settings: Settings, bid: str) -> None:
    click.echo(
        f"demo: some need an operator: open {supervisor.web_url}/approvals, sign in as "
        f"{settings.admin_user!r}, and allow, deny or answer them "
        f"(or use `signoff approvals list --batch {bid}`)"
    )
