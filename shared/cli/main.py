"""The `signoff` command group and its error handling: a clear message and a non-zero exit."""

from __future__ import annotations

import sys
from typing import Any

import click

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


def main() -> None:
    # importing the command modules registers their commands on `cli`
    from shared.cli import (  # noqa: F401
        approvals,
        batch,
        chat,
        conversations,
        doctor,
        policy,
        processes,
        users,
    )

    cli()
