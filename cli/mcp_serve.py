"""`signoff mcp serve`: Signoff's tools over stdio, for an IDE or another agent host.

A command of the `mcp` group (`cli/mcp_servers.py`, the MCP servers Signoff uses).

The host starts this command and speaks MCP on its stdin and stdout; the tools act as
the API token's caller (`shared.mcp_server`), looked up again at every call. The
token comes from SIGNOFF_TOKEN (or --token, which other users of the machine can see
in the process list). The SDK is imported when the command runs: importing it takes a
second or more, which every other `signoff` command would otherwise pay at start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from shared.client import Client
from shared.store.users import TokenStore

if TYPE_CHECKING:
    from mcp.server import Server

__all__ = ["serve"]


async def _serve_stdio(server: Server) -> None:
    from mcp.server.stdio import stdio_server  # imported here: see the module's docstring

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


@click.command()
@click.option(
    "--token",
    envvar="SIGNOFF_TOKEN",
    show_envvar=True,
    help="API token the tools act as (`signoff token create NAME --role submitter`).",
)
def serve(token: str | None) -> None:
    """Serve Signoff's tools over stdio: start conversations, read them, resolve approvals."""
    if not token:
        raise click.UsageError(
            "an API token is needed: set SIGNOFF_TOKEN (or pass --token); an operator "
            "makes one with `signoff token create NAME --role submitter`"
        )
    import anyio

    from shared.mcp_server import build_server, caller_for_token  # imports the SDK: see above

    with Client() as client:
        tokens = TokenStore(client.redis, client.keys)
        caller = caller_for_token(tokens, token)  # refused at start: a message and exit 1
        click.echo(
            f"signoff mcp: serving over stdio as {caller.name} ({caller.role.value})", err=True
        )
        server = build_server(client, lambda: caller_for_token(tokens, token))
        anyio.run(_serve_stdio, server)
