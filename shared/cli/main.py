"""The `signoff` command group: its commands, and its error handling (a clear message and a
non-zero exit). The command modules define their commands; only this module registers them."""

from __future__ import annotations

import sys
from typing import Any

import click

from shared.cli.agents import agent
from shared.cli.approvals import approvals
from shared.cli.batch import batch
from shared.cli.chat import chat
from shared.cli.conversations import submit, tail
from shared.cli.doctor import doctor
from shared.cli.policy import policy
from shared.cli.processes import beat, up, web, worker
from shared.cli.schedules import schedule
from shared.cli.triggers import trigger
from shared.cli.users import token, user
from shared.cli.webhooks import webhook
from shared.errors import NotFound, SignoffError

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
    approvals,
    batch,
    beat,
    chat,
    doctor,
    policy,
    schedule,
    submit,
    tail,
    token,
    trigger,
    up,
    user,
    web,
    webhook,
    worker,
)
for command in COMMANDS:
    cli.add_command(command)


def main() -> None:
    cli()
