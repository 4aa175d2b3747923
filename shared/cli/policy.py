"""`signoff policy`: the operator's tool policy (show, set, unset, log)."""

from __future__ import annotations

import getpass
import time

import click
from pydantic import ValidationError

from shared.client import Client
from shared.errors import InvalidInput
from shared.models.config import ToolPolicy
from shared.store.policy import PolicyChange, PolicyRule, PolicyStore

__all__ = ["policy"]

_POLICIES = click.Choice([p.value for p in ToolPolicy])


def _actor(explicit: str | None) -> str:
    return explicit or f"cli:{getpass.getuser()}"


def _describe(change: PolicyChange) -> str:
    before = change.before.value if change.before else "-"
    after = change.after.value if change.after else "-"
    return f"{change.tool} in {change.scope}: {before} -> {after}"


@click.group()
def policy() -> None:
    """The operator's tool policy: auto, ask or deny per tool, globally, per batch or label."""


@policy.command("show")
def show() -> None:
    """Every tool workers described, with its default and global policy, then every rule."""
    with Client() as client:
        store = PolicyStore(client.redis, client.keys)
        rules, catalog = store.load(), store.catalog()
    if not catalog:
        click.echo("no worker has described its tools yet (start `signoff worker`)")
    for name, info in catalog.items():
        now = rules.base(name, default=info.default_policy)
        click.echo(f"{name:<20} {now.value:<5} (default {info.default_policy.value})")
    for rule in rules.rules:
        click.echo(f"rule: {rule.tool} {rule.policy.value} in {rule.scope}")


@policy.command("set")
@click.argument("tool")
@click.argument("value", metavar="auto|ask|deny", type=_POLICIES)
@click.option("--batch", "batch_id", help="Only for this batch.")
@click.option("--label", help="Only for conversations carrying this label.")
@click.option("--actor", help="Who makes the change (default: cli:<login>).")
def set_(tool: str, value: str, batch_id: str | None, label: str | None, actor: str | None) -> None:
    """Set a tool's policy; the change is logged with who made it."""
    try:
        rule = PolicyRule(tool=tool, policy=ToolPolicy(value), batch_id=batch_id, label=label)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'rule'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidInput(problems) from None
    with Client() as client:
        change = PolicyStore(client.redis, client.keys).set(rule, actor=_actor(actor))
    click.echo(_describe(change))


@policy.command("unset")
@click.argument("tool")
@click.option("--batch", "batch_id", help="The rule for this batch.")
@click.option("--label", help="The rule for this label.")
@click.option("--actor", help="Who makes the change (default: cli:<login>).")
def unset(tool: str, batch_id: str | None, label: str | None, actor: str | None) -> None:
    """Remove a rule: the tool falls back to a wider rule or its default."""
    if batch_id and label:
        raise InvalidInput("give --batch or --label, not both")
    with Client() as client:
        store = PolicyStore(client.redis, client.keys)
        change = store.remove(tool, batch_id=batch_id, label=label, actor=_actor(actor))
    click.echo(_describe(change))


@policy.command("log")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500))
def log_(limit: int) -> None:
    """Who changed the policy, when, and how (newest first)."""
    with Client() as client:
        changes = PolicyStore(client.redis, client.keys).changes(limit=limit)
    for change in changes:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(change.at))
        click.echo(f"{when}Z {change.actor}: {_describe(change)}")
