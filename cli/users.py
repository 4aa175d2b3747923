"""`signoff user` and `signoff token`: operators who sign in, and bearer tokens for API clients."""

from __future__ import annotations

import getpass
import re
from datetime import UTC, datetime

import click

from shared.client import Client
from shared.models.users import Role
from shared.store.users import MAX_TOKEN_LIFETIME_S, TokenStore, UserStore

__all__ = ["Duration", "token", "user"]

_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


class Duration(click.ParamType):
    """A duration like ``90s``, ``15m``, ``12h``, ``30d`` or ``2w``, as whole seconds."""

    name = "duration"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        match = re.fullmatch(r"\s*(\d{1,9})\s*([smhdw])\s*", str(value))
        if match is None:
            self.fail(f"{value!r} is not a duration like 90s, 15m, 12h, 30d or 2w", param, ctx)
        seconds = int(match[1]) * _UNITS_S[match[2]]
        if not 0 < seconds <= MAX_TOKEN_LIFETIME_S:
            self.fail(f"{value!r} must be more than 0 and at most 10 years", param, ctx)
        return seconds


def _actor() -> str:
    """Who runs this command, for the log."""
    try:
        return f"cli {getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _time(value: float | None, *, none: str = "-") -> str:
    if value is None:
        return none
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M UTC")


_ROLES = click.Choice([r.value for r in Role])
_ROLE_HELP = (
    "viewer reads; submitter also sends prompts; approver reads and resolves approvals "
    "(within its --scope); operator does everything."
)
_scope_option = click.option(
    "--scope",
    "scopes",
    multiple=True,
    metavar="KIND:VALUE",
    help="An approver resolves only approvals its scopes match: tool:NAME, label:NAME, "
    "batch:ID, agent:NAME (repeat; kinds together narrow).",
)


@click.group()
def user() -> None:
    """Accounts of the web UI: operators, approvers, submitters, viewers."""


@user.command("add")
@click.argument("username")
@click.password_option(help="The password (asked twice when omitted).")
@click.option("--role", type=_ROLES, default=None, help=_ROLE_HELP + " New accounts: operator.")
@_scope_option
def add(username: str, password: str, role: str | None, scopes: tuple[str, ...]) -> None:
    """Add an account (or set the password, and the role and scopes if given, of an existing
    one; a new password ends its sessions)."""
    with Client() as client:
        store = UserStore(client.redis, client.keys)
        store.ensure(
            username, password, role=role, scopes=scopes if role or scopes else None, actor=_actor()
        )
        info = store.info(username)
    scoped = f" within {' '.join(info.scopes)}" if info.scopes else ""
    click.echo(f"{info.role.value} {username!r}{scoped} can sign in")


@user.command("role")
@click.argument("username")
@click.argument("role", type=_ROLES)
@_scope_option
def set_role(username: str, role: str, scopes: tuple[str, ...]) -> None:
    """Give an account a role (and an approver its scopes); its sessions have them at once."""
    with Client() as client:
        UserStore(client.redis, client.keys).set_access(username, role, scopes, actor=_actor())
    scoped = f" within {' '.join(scopes)}" if scopes else ""
    click.echo(f"{username!r} is now {role}{scoped}")


@user.command("passwd")
@click.argument("username")
@click.password_option(help="The new password (asked twice when omitted).")
def passwd(username: str, password: str) -> None:
    """Change an operator's password; every session of theirs ends."""
    with Client() as client:
        ended = UserStore(client.redis, client.keys).set_password(
            username, password, actor=_actor()
        )
    click.echo(f"password of {username!r} changed; {ended} session(s) ended")


@user.command("disable")
@click.argument("username")
def disable(username: str) -> None:
    """Stop an operator from signing in; every session of theirs ends."""
    with Client() as client:
        ended = UserStore(client.redis, client.keys).disable(username, actor=_actor())
    click.echo(f"operator {username!r} disabled; {ended} session(s) ended")


@user.command("enable")
@click.argument("username")
def enable(username: str) -> None:
    """Let a disabled operator sign in again."""
    with Client() as client:
        UserStore(client.redis, client.keys).enable(username, actor=_actor())
    click.echo(f"operator {username!r} can sign in")


@user.command("slack")
@click.argument("username")
@click.argument("slack_user")
def slack(username: str, slack_user: str) -> None:
    """Map a Slack user id (U012ABCDEF) to an account: its Allow and Deny in Slack are
    that account's (unmapped Slack users are refused)."""
    with Client() as client:
        UserStore(client.redis, client.keys).set_slack_user(username, slack_user, actor=_actor())
    click.echo(f"Slack user {slack_user} acts as {username!r}")


@user.command("list")
def list_users() -> None:
    """The accounts: name, whether they may sign in, when they were added, role, scopes."""
    with Client() as client:
        for info in UserStore(client.redis, client.keys).users():
            status = "disabled" if info.disabled else "enabled"
            scopes = " ".join(info.scopes) or "-"
            fields = (info.username, status, _time(info.created_at), info.role.value, scopes)
            click.echo("\t".join(fields))


@click.group()
def token() -> None:
    """Bearer tokens for the JSON API."""


@token.command("create")
@click.argument("name")
@click.option("--role", type=_ROLES, default=Role.VIEWER.value, show_default=True, help=_ROLE_HELP)
@_scope_option
@click.option(
    "--expires-in",
    type=Duration(),
    default=None,
    help="Expire after this long (90s, 15m, 12h, 30d, 2w); by default never.",
)
def create(name: str, role: str, scopes: tuple[str, ...], expires_in: int | None) -> None:
    """Create a token; it is printed once and stored only as a digest."""
    with Client() as client:
        issued = TokenStore(client.redis, client.keys).issue(
            name, role, expires_in_s=expires_in, actor=_actor(), scopes=scopes
        )
    click.echo(issued.token)
    expiry = _time(issued.info.expires_at, none="never")
    click.echo(f"token {issued.info.token_id} ({role}), expires: {expiry}", err=True)


@token.command("list")
def list_tokens() -> None:
    """The tokens: id, name, role, created, expires, last used, scopes (never their values)."""
    with Client() as client:
        tokens = TokenStore(client.redis, client.keys).tokens()
    click.echo("id\tname\trole\tcreated\texpires\tlast used\tscopes")
    for found in tokens:
        expires = _time(found.expires_at, none="never") + (" (expired)" if found.expired() else "")
        fields = (
            found.token_id,
            found.name,
            found.role.value,
            _time(found.created_at),
            expires,
            _time(found.last_used_at, none="never"),
            " ".join(found.scopes) or "-",
        )
        click.echo("\t".join(fields))


@token.command("revoke")
@click.argument("token_id")
def revoke(token_id: str) -> None:
    """Revoke a token by the id `signoff token list` shows; it is refused from then on."""
    with Client() as client:
        revoked = TokenStore(client.redis, client.keys).revoke(token_id, actor=_actor())
    click.echo(f"token {revoked.token_id} ({revoked.name}) revoked")
