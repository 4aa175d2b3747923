"""`signoff policy`: the operator's tool policy (show, set, unset, log, title)."""

from __future__ import annotations

import getpass
import time

import click
from pydantic import ValidationError

from shared.client import Client
from shared.errors import InvalidInput
from shared.models.config import ToolPolicy
from shared.store.policy import (
    MAX_APPROVALS,
    PolicyChange,
    PolicyRule,
    PolicyStore,
    TitleArguments,
)

__all__ = ["policy"]

_POLICIES = click.Choice([p.value for p in ToolPolicy])


def _actor(explicit: str | None) -> str:
    return explicit or f"cli:{getpass.getuser()}"


def _describe(change: PolicyChange) -> str:
    before = change.before.value if change.before else "-"
    after = change.after.value if change.after else "-"
    return f"{change.tool} in {change.scope}: {before} -> {after}"


def _options(rule: PolicyRule) -> str:
    """A rule's quorum and separation of duties, when set."""
    parts = [f"{rule.approvals} approvals"] if rule.approvals > 1 else []
    if rule.separation is not None:
        parts.append("separation" if rule.separation else "no separation")
    return f" ({', '.join(parts)})" if parts else ""


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
        click.echo(f"rule: {rule.tool} {rule.policy.value} in {rule.scope}{_options(rule)}")


@policy.command("set")
@click.argument("tool")
@click.argument("value", metavar="auto|ask|deny", type=_POLICIES)
@click.option("--batch", "batch_id", help="Only for this batch.")
@click.option("--label", help="Only for conversations carrying this label.")
@click.option(
    "--approvals",
    type=click.IntRange(1, MAX_APPROVALS),
    default=1,
    show_default=True,
    help="With ask: distinct approvers who must allow a call before it runs.",
)
@click.option(
    "--separation/--no-separation",
    default=None,
    help="With ask: whether the creator of a conversation (its batch, schedule or trigger) "
    "is kept from approving its calls (default: kept unless an operator).",
)
@click.option("--actor", help="Who makes the change (default: cli:<login>).")
def set_(
    tool: str,
    value: str,
    batch_id: str | None,
    label: str | None,
    approvals: int,
    separation: bool | None,
    actor: str | None,
) -> None:
    """Set a tool's policy; the change is logged with who made it."""
    try:
        rule = PolicyRule(
            tool=tool,
            policy=ToolPolicy(value),
            batch_id=batch_id,
            label=label,
            approvals=approvals,
            separation=separation,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'rule'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidInput(problems) from None
    with Client() as client:
        change = PolicyStore(client.redis, client.keys).set(rule, actor=_actor(actor))
    click.echo(_describe(change) + _options(rule))


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


@policy.command("title")
@click.argument("tool")
@click.argument("arguments", nargs=-1)
def title(tool: str, arguments: tuple[str, ...]) -> None:
    """Title TOOL's requests by one or two of its ARGUMENTS (`title send_email to subject`);
    none: by the first short string arguments again."""
    with Client() as client:
        store = PolicyStore(client.redis, client.keys)
        if not arguments:
            store.clear_title_arguments(tool)
            click.echo(f"{tool}: titled by the first short string arguments")
            return
        try:
            chosen = TitleArguments(tool=tool, arguments=list(arguments))
        except ValidationError as exc:
            raise InvalidInput("; ".join(e["msg"] for e in exc.errors())) from None
        store.set_title_arguments(chosen)
    click.echo(f"{tool}: titled by {', '.join(arguments)}")
