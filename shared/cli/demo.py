"""`signoff up --demo`: a small batch on the offline model; some prompts need an operator."""

from __future__ import annotations

from pathlib import Path

import click

from shared.batches import BatchConfig, BatchStore
from shared.cli.batch import _lines, watch, write_results
from shared.cli.supervisor import Supervisor
from shared.client import Client
from shared.config import ConversationConfig
from shared.settings import load_settings

__all__ = ["run_demo"]

EXAMPLES = Path("examples/prompts.jsonl")
RESULTS = Path("results.jsonl")


def run_demo(supervisor: Supervisor, *, examples: Path = EXAMPLES, results: Path = RESULTS) -> None:
    """Runs the example prompts as a batch and writes results.jsonl once all are resolved."""
    settings = load_settings(redis_url=supervisor.redis_url, web_port=supervisor.web_port)
    with Client(settings) as client:
        store = BatchStore(client.redis, client.keys, settings, client.tasks)
        bid = store.create(BatchConfig(conversation=ConversationConfig.from_settings(settings)))
        report = store.submit(bid, _lines(examples, settings))
        store.finish_submission(bid)
        click.secho(
            f"demo: batch {bid} runs {report.submitted} prompts from {examples} on the demo model",
            fg="green",
        )
        click.echo(
            f"demo: some need an operator: open {supervisor.web_url}/approvals, sign in as "
            f"{settings.admin_user!r}, and allow, deny or answer them "
            f"(or use `signoff approvals list --batch {bid}`)"
        )
        watch(store, bid, settings)
        written = write_results(store, bid, results)
    click.secho(
        f"demo: {written} results written to {results}; Ctrl-C stops everything", fg="green"
    )
