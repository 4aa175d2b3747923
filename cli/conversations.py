"""Commands for conversations: `submit` and `tail`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from cli.model_settings import model_settings_from, model_settings_options
from cli.tail_view import TailView
from shared.client import Client
from shared.models.chunks import Text, Thought, ToolCallChunk
from shared.models.config import ToolSelection
from shared.models.events import EventBase
from shared.models.model_settings import check_supported
from shared.validation import prompt_options

__all__ = ["submit", "tail"]


@click.command()
@click.argument("prompt")
@click.option("--follow", is_flag=True, help="Stream the answer and wait for the end of the turn.")
@click.option("--conversation", "conversation_id", default=None, help="Send to this conversation.")
@click.option("--allow-all", is_flag=True, help="Run every tool without asking.")
@click.option("--agent", default=None, help="A new conversation runs as this named agent.")
@click.option(
    "--turn-id",
    default=None,
    help="With --conversation: the turn's id, as an idempotency key (sending the same prompt "
    "under it again queues nothing).",
)
@click.option(
    "--tool-selection",
    type=click.Choice([s.value for s in ToolSelection]),
    default=None,
    help="This turn only: whether the model may, must or must not call tools.",
)
@click.option(
    "--timeout", "timeout_s", type=float, default=None, help="This turn only: its time limit (s)."
)
@click.option(
    "--response-schema",
    "schema_source",
    default=None,
    metavar="JSON|@FILE",
    help="This turn only: a JSON schema its answer must match (inline, or @path to a file).",
)
@model_settings_options
def submit(
    prompt: str,
    follow: bool,
    conversation_id: str | None,
    allow_all: bool,
    agent: str | None,
    turn_id: str | None,
    tool_selection: str | None,
    timeout_s: float | None,
    schema_source: str | None,
    **settings: Any,
) -> None:
    """Send PROMPT as a background job; prints the conversation and turn ids.

    The model settings are this turn's, over the conversation's.
    """
    if agent and conversation_id:
        raise click.UsageError("--agent starts a new conversation: leave out --conversation")
    if turn_id and not conversation_id:  # a retry would make a second conversation
        raise click.UsageError("--turn-id needs --conversation")
    # checked before a conversation is created
    checked = prompt_options(
        tool_selection=tool_selection,
        timeout_s=timeout_s,
        response_schema=read_schema(schema_source) if schema_source else None,
        model_settings=model_settings_from(settings),
    )
    options = checked.model_dump(exclude_none=True)
    if turn_id:
        options["turn_id"] = turn_id
    with Client() as client:
        if checked.model_settings is not None and not (conversation_id or agent):
            check_supported(client.settings.provider, checked.model_settings)
        conversation = (
            client.conversation(conversation_id)
            if conversation_id
            else client.new_conversation(allow_all=allow_all, agent=agent)
        )
        if not follow:
            sent = conversation.submit(prompt, **options)
            answer = {"conversation_id": conversation.conversation_id, "turn_id": sent.turn_id}
            click.echo(json.dumps(answer | ({"replayed": True} if sent.replayed else {})))
            return
        click.echo(f"conversation {conversation.conversation_id}", err=True)
        for chunk in conversation.chat(prompt, **options):
            show_chunk(chunk)
        click.echo()


def read_schema(source: str) -> dict[str, Any]:
    """A JSON object given inline or as ``@path``; a clear usage error otherwise."""
    where = "--response-schema"
    if source.startswith("@"):
        try:
            source = Path(source[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            problem = f"cannot read {source[1:]}: {exc.strerror or exc}"
            raise click.BadParameter(problem, param_hint=where) from None
    try:
        schema = json.loads(source)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON ({exc})", param_hint=where) from None
    if not isinstance(schema, dict):
        raise click.BadParameter("must be a JSON object", param_hint=where)
    return schema


def show_chunk(chunk: Thought | Text | ToolCallChunk) -> None:
    """Thoughts dimmed, text plain, tool calls on their own line."""
    if isinstance(chunk, Thought):
        click.secho(chunk.text, dim=True, nl=False, err=True)
    elif isinstance(chunk, Text):
        click.echo(chunk.text, nl=False)
    else:
        click.secho(f"\n[tool call {chunk.call.name} {json.dumps(chunk.call.args)}]", fg="cyan")


@click.command()
@click.argument("conversation_id")
@click.option("--from-start", is_flag=True, help="Replay the stored events first.")
def tail(conversation_id: str, from_start: bool) -> None:
    """Follow a conversation's events live (Ctrl-C to stop; stopping cancels nothing)."""
    with Client() as client:
        client.conversation(conversation_id)
        after = "0-0" if from_start else client.events.last_id(conversation_id)
        view = TailView()
        try:
            while True:
                for event in client.events.wait(conversation_id, after, block_ms=1000):
                    after = event.id or after
                    show_event(event, view)
        except KeyboardInterrupt:
            pass


_STYLES: dict[str, dict[str, Any]] = {
    "": {},
    "dim": {"dim": True},
    "tool": {"fg": "cyan"},
    "notice": {"fg": "yellow"},
    "error": {"fg": "red"},
}


def show_event(event: EventBase, view: TailView) -> None:
    """Prints an event as `TailView` reads it."""
    for piece in view.pieces(event):
        click.secho(piece.text, nl=False, **_STYLES[piece.style])
