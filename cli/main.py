"""The `signoff` command group: its commands, and its error handling (a clear message and a
non-zero exit). The command modules define their commands; only this module registers them."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from cli.agents import agent
from cli.approvals import approvals
from cli.archive import archive
from cli.batch import batch
from cli.batch_runs import compare, rerun, retry
from cli.budgets import budget
from cli.chat import chat
from cli.conversation_group import conversation
from cli.conversations import submit, tail
from cli.doctor import doctor
from cli.mcp_serve import serve as mcp_serve
from cli.mcp_servers import mcp
from cli.policy import policy
from cli.prices import price
from cli.processes import beat, up, web, worker
from cli.routes import route
from cli.schedules import schedule
from cli.triggers import trigger
from cli.usage import usage
from cli.users import token, user
from cli.webhooks import webhook
from shared.errors import NotFound, SettingsError, SignoffError
from shared.logs import configure
from shared.settings import load_settings

__all__ = ["cli", "main"]


class SignoffGroup(click.Group):
    """Turns Signoff errors into one line on stderr and exit status 1 (2 for not found)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SignoffError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(2 if isinstance(exc, NotFound) else 1)


@click.group(cls=SignoffGroup)
@click.version_option(package_name="signoff")
def cli() -> None:
    """Signoff: LLM agent conversations as background jobs, with humans in the loop."""


COMMANDS = (
    agent,
    archive,
    approvals,
    batch,
    beat,
    budget,
    chat,
    conversation,
    doctor,
    mcp,
    policy,
    price,
    route,
    schedule,
    submit,
    tail,
    token,
    trigger,
    up,
    usage,
    user,
    web,
    webhook,
    worker,
)
for command in COMMANDS:
    cli.add_command(command)
mcp.add_command(mcp_serve)  # `signoff mcp serve`, beside the group's server registry
batch.add_command(retry)  # `signoff batch retry`, `rerun`, `compare`: its items run again
batch.add_command(rerun)
batch.add_command(compare)


def main() -> None:
    _log_lines()
    cli()


def _log_lines() -> None:
    """Warnings of the libraries the CLI uses, in the settings' format, secrets masked; with
    settings that do not load, the command itself says what is wrong."""
    try:
        settings = load_settings()
    except SettingsError:
        return
    configure(settings, process="cli", level=logging.WARNING)
