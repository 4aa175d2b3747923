"""`signoff conversation`: what is done to a conversation as a whole (`fork`)."""

from __future__ import annotations

import json

import click

from shared.client import Client

__all__ = ["conversation"]


@click.group()
def conversation() -> None:
    """Act on one conversation."""


@conversation.command()
@click.argument("conversation_id")
@click.option(
    "--at-step", type=click.IntRange(min=0), required=True, help="Steps of history to keep."
)
@click.option("--new-id", "new_id", default=None, help="The fork's id (default: a new one).")
@click.option("--agent", default=None, help="Run the fork as this named agent.")
@click.option(
    "--agent-version",
    type=click.IntRange(min=1),
    default=None,
    help="This version of the agent (of the original's agent when --agent is left out).",
)
def fork(
    conversation_id: str,
    at_step: int,
    new_id: str | None,
    agent: str | None,
    agent_version: int | None,
) -> None:
    """A new idle conversation with the first --at-step steps of CONVERSATION_ID's history."""
    with Client() as client:
        new = client.conversation(conversation_id).fork(
            at_step, conversation_id=new_id, agent=agent, agent_version=agent_version
        )
    click.echo(
        json.dumps(
            {"conversation_id": new.conversation_id, "source": conversation_id, "at_step": at_step}
        )
    )
