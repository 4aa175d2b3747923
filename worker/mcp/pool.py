"""The MCP servers of one worker process: their links, their discovery, their tools' calls.

A leg's tools are the worker's own plus the MCP tools its conversation selects, built
from the listing cached in Redis (`shared.mcp.store`) and rebuilt only when a server's
tool version moves. A call goes to the server's link on the background loop and waits
at most the call timeout; every way it can fail becomes a tool error for the model.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from typing import Any

import mcp_types

from shared.errors import InvalidInput, NotFound, SignoffError
from shared.mcp.catalog import build_listing
from shared.mcp.selection import selected_servers, selects
from shared.mcp.store import McpServerStore
from shared.models.config import ConversationConfig
from shared.models.mcp import McpServer, McpTool
from shared.settings import Settings
from worker.mcp.link import Link, LinkFailed
from worker.mcp.loop import BackgroundLoop, LoopTimeout
from worker.mcp.results import outcome_of
from worker.mcp.rounds import MAX_ROUNDS, declined, parked, resumed_round
from worker.tools import Tool, ToolContext, ToolFailed, ToolOutcome, ToolRegistry
from worker.tools.base import AskPerson, Resumed

__all__ = ["McpPool"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Built:
    """The tools of one version of one server's listing."""

    version: tuple[float, int, bool]
    tools: dict[str, Tool]


class McpPool:
    """Links and tools of every MCP server this process has used."""

    def __init__(self, settings: Settings, store: McpServerStore) -> None:
        self.settings = settings
        self.store = store
        self.loop = BackgroundLoop()
        self._links: dict[str, tuple[float, Link]] = {}
        self._links_lock = threading.Lock()
        self._built: dict[str, _Built] = {}

    # Tools for a leg

    def registry_for(self, config: ConversationConfig, base: ToolRegistry) -> ToolRegistry:
        """`base`, plus the MCP tools the conversation selects (the same registry if none)."""
        if not config.mcp:
            return base
        names = selected_servers(config.mcp)
        servers = self.store.some(names)
        tools = [
            tool
            for server in servers.values()
            for name, tool in self._tools_of(server).items()
            if selects(config.mcp, server.name, name)
        ]
        return base.extended(tools, servers=names)

    def _tools_of(self, server: McpServer) -> dict[str, Tool]:
        """The server's offered tools by their name on the server, built once per version."""
        version = (server.created_at, server.tools_version, server.trusted)
        built = self._built.get(server.name)
        if built is None or built.version != version:
            tools = {t.name: self._tool(server, t) for t in server.offered()}
            built = _Built(version, tools)
            self._built[server.name] = built
        return built.tools

    def _tool(self, server: McpServer, listed: McpTool) -> Tool:
        def run(args: dict[str, Any], context: ToolContext) -> Any:
            outcome = self.call(server, listed.name, args, ask=context.ask, resumed=context.resumed)
            if not outcome.ok:
                raise ToolFailed(outcome.error)
            return outcome.result

        return Tool(
            name=listed.exposed,
            description=listed.description or listed.annotations.title or listed.name,
            parameters=listed.input_schema,
            run=run,
            policy=server.default_policy(listed),
            untrusted_schema=True,
        )

    # Calls and discovery

    def call(
        self,
        server: McpServer,
        tool: str,
        args: dict[str, Any],
        *,
        ask: AskPerson | None = None,
        resumed: Resumed | None = None,
    ) -> ToolOutcome:
        """The outcome of one call; never raises for the server's failures.

        InputNeeded when the server asks a question the call parks on (`worker/mcp/rounds.py`);
        `resumed`: the call again, with the person's answer. `ask`: how an older server's
        input request, inside the live call, reaches a person (declined without it).
        """
        responses, state, rounds = resumed_round(resumed)
        while rounds <= MAX_ROUNDS:
            result = self._round(server, tool, args, ask, responses, state)
            if not isinstance(result, mcp_types.InputRequiredResult):
                return result
            rounds += 1
            question = parked(server.name, result, rounds)
            if question is not None:
                raise question
            try:
                responses, state = declined(result), result.request_state
            except InvalidInput as exc:
                return _failure(f"MCP server {server.name} stopped {tool}: {exc.message}")
        return _failure(f"MCP server {server.name} asked for input more than {MAX_ROUNDS} times")

    def _round(
        self,
        server: McpServer,
        tool: str,
        args: dict[str, Any],
        ask: AskPerson | None,
        responses: dict[str, Any] | None,
        state: str | None,
    ) -> ToolOutcome | mcp_types.InputRequiredResult:
        settings = self.settings
        limit = settings.mcp_call_timeout_s + settings.mcp_connect_timeout_s + 5
        limit += 3 * settings.mcp_elicit_wait_s  # the link's own timeout stands still meanwhile
        try:
            link = self._link(server)
            result = self.loop.run(link.call(tool, args, ask, responses, state), timeout_s=limit)
        except (LoopTimeout, TimeoutError):
            timeout = self.settings.mcp_call_timeout_s
            return _failure(
                f"MCP server {server.name} did not answer {tool} within {timeout:g} s "
                "(SIGNOFF_MCP_CALL_TIMEOUT_S); its effect is unknown"
            )
        except LinkFailed as exc:
            return _failure(f"{exc}; its effect is unknown")
        except SignoffError as exc:
            return _failure(f"MCP server {server.name}: {exc.message}")
        if isinstance(result, mcp_types.InputRequiredResult):
            return result
        return outcome_of(server.name, tool, result, limit=self.settings.mcp_max_result_bytes)

    def refresh(self, name: str, *, reconnect: bool = True) -> McpServer | None:
        """Lists the server's tools again and records them (or the failure).

        `reconnect`: through a new session (an operator's refresh: a changed command or a
        dead server starts again), else through the open one (its list-changed notice).
        """
        try:
            server = self.store.get(name)
        except NotFound:
            return None
        link = self._link(server, fresh=reconnect)
        timeout = self.settings.mcp_connect_timeout_s + self.settings.mcp_call_timeout_s
        try:
            raw = self.loop.run(asyncio.wait_for(link.list_tools(), timeout), timeout_s=timeout + 5)
        except (LoopTimeout, TimeoutError):
            return self.store.record_failure(name, f"listing tools took over {timeout:g} s")
        except LinkFailed as exc:
            return self.store.record_failure(name, str(exc))
        except Exception as exc:
            return self.store.record_failure(name, link.describe(exc, "failed to list its tools"))
        listing = build_listing(name, raw, max_tools=self.settings.mcp_max_tools)
        return self.store.record_listing(name, listing)

    async def _tools_changed(self, name: str) -> None:
        """The server said its tool list changed: list again, off the loop's thread (not
        awaited: the listing runs on this loop, which must not wait for itself)."""
        asyncio.get_running_loop().run_in_executor(None, self._refresh_logged, name)

    def _refresh_logged(self, name: str) -> None:
        try:
            self.refresh(name, reconnect=False)
        except Exception as exc:  # off any leg: logged, and the next change or refresh retries
            log.warning("MCP server %s: refreshing its tools failed: %s", name, exc)

    def _link(self, server: McpServer, *, fresh: bool = False) -> Link:
        """The server's link, replaced when the server was registered again (or `fresh`)."""
        with self._links_lock:
            known = self._links.get(server.name)
            if known is not None and known[0] == server.created_at and not fresh:
                return known[1]
            connection = self.store.connection(server.name)
            link = Link(connection, self.settings, on_tools_changed=self._tools_changed)
            self._links[server.name] = (server.created_at, link)
        if known is not None:
            self._close_soon(known[1])
        return link

    def _close_soon(self, link: Link) -> None:
        asyncio.run_coroutine_threadsafe(link.close(), self.loop.loop())

    def close(self) -> None:
        """Ends every session (stdio servers exit) and the loop."""
        for _, link in self._links.values():
            try:
                self.loop.run(link.close(), timeout_s=10)
            except LoopTimeout:
                log.warning("MCP server %s did not close in time", link.name)
        self._links.clear()
        self.loop.stop()


def _failure(message: str) -> ToolOutcome:
    return ToolOutcome.failure(message)
