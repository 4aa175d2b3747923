"""`signoff price`: what each provider's model costs per million tokens."""

from __future__ import annotations

import getpass

import click

from shared.client import Client
from shared.models.prices import Price, PriceSpec
from shared.validation import checked_options

__all__ = ["price"]


def _line(found: Price) -> str:
    cached = "=input" if found.cached_input_per_mtok is None else f"{found.cached_input_per_mtok:g}"
    return (
        f"{found.provider}/{found.model}\tinput {found.input_per_mtok:g}\tcached {cached}\t"
        f"output {found.output_per_mtok:g}\t(per million tokens; set by {found.set_by})"
    )


@click.group()
def price() -> None:
    """Model prices per million tokens: every model call's cost is counted at them."""


@price.command("set")
@click.argument("provider")
@click.argument("model")
@click.option("--input", "input_per_mtok", type=float, required=True, help="Per 1M prompt tokens.")
@click.option(
    "--cached-input",
    "cached_input_per_mtok",
    type=float,
    default=None,
    help="Per 1M cached prompt tokens (default: the input price).",
)
@click.option(
    "--output", "output_per_mtok", type=float, required=True, help="Per 1M output tokens."
)
def set_(
    provider: str,
    model: str,
    input_per_mtok: float,
    cached_input_per_mtok: float | None,
    output_per_mtok: float,
) -> None:
    """Set the price of PROVIDER's MODEL; it applies from the next model call."""
    spec = checked_options(
        PriceSpec,
        "price",
        {
            "input_per_mtok": input_per_mtok,
            "cached_input_per_mtok": cached_input_per_mtok,
            "output_per_mtok": output_per_mtok,
        },
    )
    with Client() as client:
        stored = client.stores.prices.set(provider, model, spec, actor=f"cli:{getpass.getuser()}")
    click.echo(_line(stored))


@price.command("list")
def list_() -> None:
    """Every price, by provider and model."""
    with Client() as client:
        found = client.stores.prices.list()
    for item in found:
        click.echo(_line(item))
    if not found:
        click.echo("no prices: every model call counts tokens and 'no price'")


@price.command("unset")
@click.argument("provider")
@click.argument("model")
def unset(provider: str, model: str) -> None:
    """Remove the price of PROVIDER's MODEL: its next calls count tokens and 'no price'."""
    with Client() as client:
        client.stores.prices.unset(provider, model)
    click.echo(f"removed the price of {provider}/{model}")
