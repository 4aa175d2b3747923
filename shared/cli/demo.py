"""The demo of `signoff up --demo`: a small batch on the offline model, written to results.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import click

from shared.cli.supervisor import Supervisor
from shared.client import Client
from shared.errors import SignoffError
from shared.settings import load_settings

__all__ = ["run_demo"]

EXAMPLES = Path("examples/prompts.jsonl")
RESULTS = Path("results.jsonl")


def run_demo(supervisor: Supervisor) -> None:
    """Runs each example prompt as its own conversation and writes one result line each."""
    settings = load_settings(redis_url=supervisor.redis_url)
    lines = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    click.echo(f"demo: running {len(lines)} prompts from {EXAMPLES}")
    with Client(settings) as client:
        turns = []
        for line in lines:
            conversation = client.new_conversation(allow_all=True)
            turns.append((line, conversation, conversation.send(line["prompt"])))
        with RESULTS.open("w") as out:
            for line, conversation, turn_id in turns:
                out.write(json.dumps(_result(line, conversation, turn_id)) + "\n")
    click.secho(f"demo: results written to {RESULTS}", fg="green")


def _result(line: dict[str, str], conversation: object, turn_id: str) -> dict[str, object]:
    from shared.client import Conversation

    assert isinstance(conversation, Conversation)
    try:
        response = conversation.wait_for_turn(turn_id, timeout=120)
    except SignoffError as exc:
        return {"id": line.get("id"), "status": "failed", "error": str(exc)}
    usage = response.usage_metadata.model_dump() if response.usage_metadata else None
    return {"id": line.get("id"), "status": "done", "text": response.text, "usage": usage}
