"""`signoff mcp`: the MCP tool servers operators register (add, list, show, remove, refresh).

The `mcp` group lives here; other `signoff mcp ...` commands register onto it. Adding
or refreshing a server asks a worker to list its tools and waits for the answer (a
worker reaches the server; this command never does). Environment and header values are
write-only: nothing here prints them.
"""

from __future__ import annotations

import getpass
import time

import click
from pydantic import ValidationError

from shared.client import Client
from shared.errors import InvalidInput
from shared.mcp.store import McpServerStore, outbound_policy
from shared.models.mcp import McpServer, McpServerRequest, McpServerState
from shared.validation import key_value_pairs

__all__ = ["mcp"]


def _request(**fields: object) -> McpServerRequest:
    try:
        return McpServerRequest.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'server'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidInput(problems) from None


def _wait(store: McpServerStore, name: str, before: float | None, timeout_s: float) -> McpServer:
    """The server once a worker has tried to list its tools (or as it is at the timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        server = store.get(name)
        if server.refreshed_at != before or time.monotonic() >= deadline:
            return server
        time.sleep(0.1)


def _summary(server: McpServer) -> str:
    where = server.url or server.command or ""
    trusted = " trusted" if server.trusted else ""
    offered = len(server.offered())
    return f"{server.name:<20} {server.state.value:<10} {offered:>4} tools{trusted}  {where}"


def _show(server: McpServer) -> None:
    click.echo(_summary(server))
    if server.env_keys:
        click.echo(f"  env: {', '.join(server.env_keys)} (values hidden)")
    if server.header_keys:
        click.echo(f"  headers: {', '.join(server.header_keys)} (values hidden)")
    if server.last_error:
        click.echo(f"  last error: {server.last_error}")
    click.echo(f"  tools version {server.tools_version}")
    for problem in server.problems:
        click.echo(f"  problem: {problem}")
    for tool in server.tools:
        hints = ", ".join(
            name
            for name, on in (
                ("read-only", tool.annotations.read_only),
                ("destructive", tool.annotations.destructive),
                ("idempotent", tool.annotations.idempotent),
                ("open-world", tool.annotations.open_world),
            )
            if on
        )
        if tool.problem:
            click.echo(f"  refused {tool.name}: {tool.problem}")
        else:
            default = server.default_policy(tool).value
            click.echo(f"  {tool.exposed:<40} default {default:<4} [{hints or 'no hints'}]")


def _report(server: McpServer, waited: bool) -> None:
    _show(server)
    if server.state is McpServerState.PENDING and waited:
        click.echo("no worker listed its tools yet: is `signoff worker` running?", err=True)
    if server.state is McpServerState.FAILING:
        raise SystemExit(1)


@click.group()
def mcp() -> None:
    """MCP tool servers: their tools are offered to agents behind the operator's policy."""


@mcp.command("add")
@click.argument("name")
@click.option("--command", "command", help='stdio: the command line, e.g. "npx server-x".')
@click.option("--env", "env", multiple=True, help="stdio: KEY=VALUE (write-only).")
@click.option("--url", help="Streamable HTTP: the server's endpoint URL.")
@click.option("--header", "headers", multiple=True, help="HTTP: KEY=VALUE (write-only).")
@click.option("--trusted", is_flag=True, help="Its read-only tools run without asking.")
@click.option("--replace", is_flag=True, help="Replace a server of the same name.")
@click.option("--wait", "wait_s", default=30.0, show_default=True, help="Seconds to wait.")
def add(
    name: str,
    command: str | None,
    env: tuple[str, ...],
    url: str | None,
    headers: tuple[str, ...],
    trusted: bool,
    replace: bool,
    wait_s: float,
) -> None:
    """Register a server; a worker lists its tools (shown when it has)."""
    request = _request(
        name=name,
        command=command,
        env=key_value_pairs("--env", env),
        url=url,
        headers=key_value_pairs("--header", headers),
        trusted=trusted,
    )
    with Client() as client:
        outbound = outbound_policy(client.settings.mcp_allowed_hosts)
        store = McpServerStore(client.redis, client.keys, outbound=outbound)
        store.add(request, actor=f"cli:{getpass.getuser()}", replace=replace)
        client.tasks.refresh_mcp(name)
        server = _wait(store, name, None, wait_s) if wait_s > 0 else store.get(name)
    _report(server, wait_s > 0)


@mcp.command("list")
def list_() -> None:
    """Every server with its state and the number of tools it offers."""
    with Client() as client:
        servers = McpServerStore(client.redis, client.keys).all()
    if not servers:
        click.echo("no MCP server is registered (`signoff mcp add`)")
    for server in servers:
        click.echo(_summary(server))
        if server.last_error:
            click.echo(f"  last error: {server.last_error}")


@mcp.command("show")
@click.argument("name")
def show(name: str) -> None:
    """One server: its state, last error, and each tool with its annotations and default."""
    with Client() as client:
        _show(McpServerStore(client.redis, client.keys).get(name))


@mcp.command("remove")
@click.argument("name")
def remove(name: str) -> None:
    """Forget a server: its tools are no longer offered."""
    with Client() as client:
        removed = McpServerStore(client.redis, client.keys).remove(name)
    click.echo(f"removed {removed.name}")


@mcp.command("refresh")
@click.argument("name")
@click.option("--wait", "wait_s", default=30.0, show_default=True, help="Seconds to wait.")
def refresh(name: str, wait_s: float) -> None:
    """List a server's tools again (through a new session), and show them."""
    with Client() as client:
        store = McpServerStore(client.redis, client.keys)
        before = store.get(name).refreshed_at
        client.tasks.refresh_mcp(name)
        server = _wait(store, name, before, wait_s) if wait_s > 0 else store.get(name)
    _report(server, wait_s > 0)
