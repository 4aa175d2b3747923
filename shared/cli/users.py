"""`signoff user` and `signoff token`: operators who sign in, and bearer tokens for API clients."""

from __future__ import annotations

import click

from shared.cli.main import cli
from shared.client import Client
from shared.users import Role, TokenStore, UserStore

__all__ = ["token", "user"]


@cli.group()
def user() -> None:
    """Operators of the web UI."""


@user.command("add")
@click.argument("username")
@click.password_option(help="The password (asked twice when omitted).")
def add(username: str, password: str) -> None:
    """Add an operator (or set the password of an existing one)."""
    with Client() as client:
        UserStore(client.redis, client.keys).ensure(username, password)
    click.echo(f"operator {username!r} can sign in")


@user.command("list")
def list_users() -> None:
    """The operators' names."""
    with Client() as client:
        for name in UserStore(client.redis, client.keys).usernames():
            click.echo(name)


@cli.group()
def token() -> None:
    """Bearer tokens for the JSON API."""


@token.command("create")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice([r.value for r in Role]),
    default=Role.VIEWER.value,
    show_default=True,
    help="viewer reads; submitter also sends prompts; operator also resolves.",
)
def create(name: str, role: str) -> None:
    """Create a token; it is printed once and stored only as a digest."""
    with Client() as client:
        secret = TokenStore(client.redis, client.keys).create(name, role)
    click.echo(secret)
