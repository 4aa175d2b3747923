"""`signoff agent`: named, versioned agents (create, list, show, update, delete).

The CLI holds the Redis credentials, so it speaks for an operator; an agent's tool
policy must still sit inside the operator's rules (`signoff policy show`).
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable
from typing import Any

import click

from cli.conversations import read_schema
from cli.model_settings import model_settings_from, model_settings_options
from shared.client import Client
from shared.errors import InvalidInput
from shared.models.agents import Agent, AgentSpec, NewAgent
from shared.models.config import ToolSelection
from shared.store.agent_removal import delete_agent
from shared.validation import checked_options, key_value_pairs

__all__ = ["agent"]


def _actor() -> str:
    return f"cli:{getpass.getuser()}"


def _json_object(name: str, raw: str) -> dict[str, Any]:
    try:
        found = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(found, dict):
        raise InvalidInput(f"{name} must be a JSON object")
    return found


def _metadata(pairs: tuple[str, ...]) -> dict[str, str] | None:
    return key_value_pairs("--meta", pairs) if pairs else None


def _spec_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options `create` and `update` share: each one an agent's field."""
    options = [
        click.option("--description", default=None, help="What the agent is for."),
        click.option("--system-prompt", default=None, help="Its system prompt."),
        click.option("--provider", default=None, help="Model provider (default: settings)."),
        click.option("--model", default=None, help="Model name (default: settings)."),
        click.option(
            "--tools",
            "tools_json",
            default=None,
            metavar="JSON",
            help='Enabled tools and their policy, e.g. \'{"calculator": "auto"}\'; only '
            "as strict as the operator's rules or stricter.",
        ),
        click.option("--label", "labels", multiple=True, help="A label (tool rules match them)."),
        click.option(
            "--mcp",
            "mcp",
            multiple=True,
            metavar="SERVER[/TOOL]",
            help="An MCP server (or one tool of it) whose tools it may use.",
        ),
        click.option(
            "--tool-selection", type=click.Choice([s.value for s in ToolSelection]), default=None
        ),
        click.option(
            "--response-schema",
            "schema_source",
            default=None,
            metavar="JSON|@FILE",
            help="A JSON schema every answer must match.",
        ),
        click.option("--max-model-calls", type=int, default=None, help="Per turn."),
        click.option("--max-tool-calls", type=int, default=None, help="Per turn."),
        click.option("--timeout", "timeout_s", type=float, default=None, help="Per turn (s)."),
        click.option(
            "--approval-timeout", "approval_timeout_s", type=int, default=None, help="Seconds."
        ),
        click.option(
            "--context-tokens",
            type=click.IntRange(min=1),
            default=None,
            help="Its model's context window, over SIGNOFF_CONTEXT_SIZES.",
        ),
        click.option("--meta", "meta", multiple=True, metavar="KEY=VALUE", help="Metadata."),
    ]
    for option in reversed(options):
        command = option(command)
    return model_settings_options(command)


def _fields(values: dict[str, Any]) -> dict[str, Any]:
    """The agent's fields given on the command line (None: not given)."""
    schema = values.pop("schema_source")
    tools = values.pop("tools_json")
    labels = values.pop("labels")
    meta = values.pop("meta")
    mcp = values.pop("mcp")
    model_settings = model_settings_from(values)
    return values | {
        "model_settings": model_settings,
        "response_schema": read_schema(schema) if schema else None,
        "tools": _json_object("--tools", tools) if tools else None,
        "labels": list(labels) or None,
        "mcp": list(mcp) or None,
        "metadata": _metadata(meta),
    }


def _show(found: Agent) -> None:
    click.echo(found.model_dump_json(indent=2))


@click.group()
def agent() -> None:
    """Named agents: a versioned configuration conversations, batches and schedules name."""


@agent.command("create")
@click.argument("name")
@_spec_options
def create(name: str, **values: Any) -> None:
    """Create agent NAME (version 1)."""
    new = checked_options(NewAgent, "agent", {"name": name, **_fields(values)})
    with Client() as client:
        created = client.stores.agents.create(new, actor=_actor())
    click.echo(f"created agent {created.name} version {created.version}")


@agent.command("update")
@click.argument("name")
@_spec_options
def update(name: str, **values: Any) -> None:
    """A new version of NAME: the options given replace those of its latest version."""
    changes = {k: v for k, v in _fields(values).items() if v is not None}
    if not changes:
        raise click.UsageError("give at least one option to change")
    with Client() as client:
        store = client.stores.agents
        spec = store.get(name).spec().model_dump()
        wanted = checked_options(AgentSpec, "agent", spec | changes)
        updated = store.update(name, wanted, actor=_actor())
    click.echo(f"updated agent {updated.name}: now version {updated.version}")


@agent.command("list")
def list_() -> None:
    """Every agent: its latest version, provider and model, and description."""
    with Client() as client:
        found = client.stores.agents.list()
    if not found:
        click.echo("no agents yet (signoff agent create NAME ...)")
    for one in found:
        model = f"{one.provider or '(default)'}/{one.model or '(default)'}"
        click.echo(f"{one.name:<24} v{one.version:<4} {model:<32} {one.description}")


@agent.command("show")
@click.argument("name")
@click.option("--version", "version", type=click.IntRange(min=1), default=None)
@click.option("--all-versions", is_flag=True, help="Every version, oldest first.")
def show(name: str, version: int | None, all_versions: bool) -> None:
    """NAME's latest version (or --version N), as JSON."""
    with Client() as client:
        store = client.stores.agents
        for found in store.versions(name) if all_versions else [store.get(name, version)]:
            _show(found)


@agent.command("delete")
@click.argument("name")
@click.option(
    "--force",
    is_flag=True,
    help="Delete it even though schedules or triggers name it (they fail at each fire).",
)
def delete(name: str, force: bool) -> None:
    """Delete NAME and its versions (its conversations keep their configuration); refused
    while schedules or triggers name it, unless --force."""
    with Client() as client:
        delete_agent(client.stores, name, force=force)
    click.echo(f"deleted agent {name}")
