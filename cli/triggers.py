"""`signoff trigger`: inbound triggers (create, list, show, rotate-secret, delete).

A trigger turns a signed external event into a prompt for an agent; senders POST to
`/api/v1/triggers/<name>` of the web process.
"""

from __future__ import annotations

import getpass

import click
from pydantic import ValidationError

from shared.client import Client
from shared.errors import InvalidInput
from shared.models.triggers import Trigger, TriggerRequest
from shared.store.triggers import TriggerStore
from shared.validation import describe_problems
from shared.webhooks.payloads import public_base

__all__ = ["trigger"]


def _url(client: Client, name: str) -> str:
    return f"{public_base(client.settings)}/api/v1/triggers/{name}"


def _show(client: Client, found: Trigger) -> None:
    click.echo(f"{found.name}: agent {found.agent}, created by {found.created_by}")
    click.echo(f"url: {_url(client, found.name)}")
    if found.description:
        click.echo(f"description: {found.description}")
    click.echo(f"template: {found.template}")


@click.group()
def trigger() -> None:
    """Inbound triggers: signed external events that prompt an agent."""


@trigger.command("create")
@click.argument("name")
@click.option("--agent", required=True, help="The agent each event runs.")
@click.option(
    "--template", required=True, help="The prompt, with event fields like {payload.issue.title}."
)
@click.option("--description", default="", help="What the trigger is for.")
@click.option("--secret", help="A whsec_<base64> secret senders sign with (default: a new one).")
def create(name: str, agent: str, template: str, description: str, secret: str | None) -> None:
    """Define a trigger; prints where senders POST and the secret they sign with (once)."""
    try:
        request = TriggerRequest(
            name=name, agent=agent, template=template, description=description, secret=secret
        )
    except ValidationError as exc:
        raise InvalidInput(describe_problems(exc, "trigger")) from None
    with Client() as client:
        client.stores.agents.get(agent)
        created = TriggerStore(client.redis, client.keys).create(
            request, actor=f"cli:{getpass.getuser()}"
        )
        _show(client, created)
    _secret(created)


def _secret(found: Trigger) -> None:
    click.echo(f"secret: {found.secret}  (shown once: senders sign webhook-signature with it)")


@trigger.command("list")
def list_() -> None:
    """Every trigger: name, agent, description."""
    with Client() as client:
        found = TriggerStore(client.redis, client.keys).all()
    if not found:
        click.echo("no triggers (create one: signoff trigger create NAME --agent A --template T)")
    for item in found:
        click.echo(f"{item.name}  agent={item.agent}  {item.description}".rstrip())


@trigger.command("show")
@click.argument("name")
def show(name: str) -> None:
    """One trigger, with the URL senders POST to."""
    with Client() as client:
        _show(client, TriggerStore(client.redis, client.keys).get(name))


@trigger.command("delete")
@click.argument("name")
def delete(name: str) -> None:
    """Delete a trigger; the conversations it started stay."""
    with Client() as client:
        TriggerStore(client.redis, client.keys).delete(name)
    click.echo(f"deleted trigger {name}")


@trigger.command("rotate-secret")
@click.argument("name")
def rotate_secret(name: str) -> None:
    """Give a trigger a new secret (printed once); events signed with the old one are refused."""
    with Client() as client:
        rotated = TriggerStore(client.redis, client.keys).rotate_secret(name)
    click.echo(f"new secret for trigger {name}")
    _secret(rotated)
