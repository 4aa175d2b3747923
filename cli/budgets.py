"""`signoff budget`: what a conversation, a batch, an agent or an owner (per day) may spend."""

from __future__ import annotations

import click

from shared.client import Client
from shared.models.budgets import Budget, BudgetKind, BudgetSpec
from shared.validation import checked_options

__all__ = ["budget"]

_KIND = click.Choice([kind.value for kind in BudgetKind])


def _line(found: Budget) -> str:
    limits = []
    if found.tokens is not None:
        limits.append(f"{found.spent_tokens}/{found.tokens} tokens")
    if found.cost is not None:
        limits.append(f"{found.spent_cost:g}/{found.cost:g} cost")
    reserved = f"reserved {found.reserved_tokens} tokens, {found.reserved_cost:g} cost"
    day = f" on {found.day} (UTC)" if found.day else ""
    state = "; exhausted" if found.exhausted else ""
    return f"{found.kind.value} {found.name}: spent {', '.join(limits)}{day}; {reserved}{state}"


@click.group()
def budget() -> None:
    """Budgets, enforced at each model call; agent and owner budgets hold per UTC day."""


@budget.command("set")
@click.argument("kind", type=_KIND)
@click.argument("name")
@click.option("--tokens", type=int, default=None, help="At most this many tokens.")
@click.option("--cost", type=float, default=None, help="At most this much money (prices' unit).")
def set_(kind: str, name: str, tokens: int | None, cost: float | None) -> None:
    """Set the budget of KIND NAME (a held batch goes on if the new budget has room)."""
    spec = checked_options(BudgetSpec, "budget", {"tokens": tokens, "cost": cost})
    with Client() as client:
        client.stores.budgets.set(BudgetKind(kind), name, spec)
        click.echo(_line(client.stores.budgets.get(BudgetKind(kind), name)))


@budget.command("show")
@click.argument("kind", type=_KIND)
@click.argument("name")
def show(kind: str, name: str) -> None:
    """The limits of KIND NAME, and what is spent and reserved (today, for agent and owner)."""
    with Client() as client:
        click.echo(_line(client.stores.budgets.get(BudgetKind(kind), name)))


@budget.command("unset")
@click.argument("kind", type=_KIND)
@click.argument("name")
def unset(kind: str, name: str) -> None:
    """Remove the budget of KIND NAME."""
    with Client() as client:
        client.stores.budgets.set(BudgetKind(kind), name, None)
    click.echo(f"removed the budget of {kind} {name}")
