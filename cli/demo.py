"""`signoff up --demo`: a small batch on the offline model; some prompts need an operator.

The demo runs once per data directory: `.signoff/demo-batch` keeps its id, and later starts
follow that batch (to its end, if it has not ended) instead of submitting it again. Before
the batch, the example MCP server (`examples/notes_server.py`) is registered as the trusted
server `notes`, and the batch's conversations may use it: its read-only `list_notes` runs
unasked, its destructive `delete_note` waits for an operator.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import click

from cli.batch import watch, write_results
from cli.batch_input import BatchFile, InputFormat
from cli.supervisor import Supervisor
from shared.client import Client
from shared.errors import Conflict
from shared.mcp.store import McpServerStore
from shared.models.batches import BatchConfig
from shared.models.config import ConversationConfig
from shared.models.mcp import McpServerRequest, McpServerState
from shared.settings import Settings, load_settings
from shared.store.batches import BatchStore

__all__ = ["run_demo"]

EXAMPLES = Path("examples/prompts.jsonl")
RESULTS = Path("results.jsonl")
NOTES_SERVER = Path("examples/notes_server.py")
NOTES_WAIT_S = 60.0


def run_demo(supervisor: Supervisor, *, examples: Path = EXAMPLES, results: Path = RESULTS) -> None:
    """Runs the example prompts as a batch and writes results.jsonl once all are resolved."""
    settings = load_settings(redis_url=supervisor.redis_url, web_port=supervisor.web_port)
    with Client(settings) as client:
        store = BatchStore(client.redis, client.keys, settings, client.tasks)
        bid = supervisor.state.demo_batch()
        if bid is None:
            _register_notes(client, supervisor)
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
    config = ConversationConfig.from_settings(settings, mcp=["notes"])
    bid = store.create(BatchConfig(conversation=config))
    supervisor.state.remember_demo_batch(bid)  # before anything is queued: never submitted twice
    lines = BatchFile(examples, InputFormat.JSONL, None).lines(settings)
    report = store.submit(bid, lines)
    store.finish_submission(bid)
    click.secho(
        f"demo: batch {bid} runs {report.submitted} prompts from {examples} on the demo model",
        fg="green",
    )
    return bid


def _register_notes(client: Client, supervisor: Supervisor) -> None:
    """Registers the example MCP server and waits until a worker has listed its tools."""
    store = McpServerStore(client.redis, client.keys)
    command = shlex.join([sys.executable, str(NOTES_SERVER.resolve())])
    notes_file = str((supervisor.state.root / "notes.json").resolve())
    request = McpServerRequest(
        name="notes", command=command, env={"NOTES_FILE": notes_file}, trusted=True
    )
    try:
        store.add(request, actor="signoff-up")
    except Conflict:
        return  # registered by an earlier start (or by hand): left as it is
    client.tasks.refresh_mcp("notes")
    deadline = time.monotonic() + NOTES_WAIT_S
    server = store.get("notes")
    while server.state is McpServerState.PENDING and time.monotonic() < deadline:
        time.sleep(0.1)
        server = store.get("notes")
    offered = ", ".join(tool.exposed for tool in server.offered()) or "none"
    click.secho(f"demo: MCP server notes is {server.state.value} (tools: {offered})", fg="green")
    if server.last_error:
        click.secho(f"demo: notes: {server.last_error}", fg="yellow")


def _hint(supervisor: Supervisor, settings: Settings, bid: str) -> None:
    click.echo(
        f"demo: some need an operator: open {supervisor.web_url}/approvals, sign in as "
        f"{settings.admin_user!r}, and allow, deny or answer them "
        f"(or use `signoff approvals list --batch {bid}`)"
    )
