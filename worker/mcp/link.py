"""One live session with one MCP server, kept open by this process and reopened when it dies.

The SDK's client is an async context manager, so one task holds it open (`_hold`) until
the link closes; calls from other tasks use the session meanwhile, at most
`mcp_max_concurrency` at once. A stdio server is a long-lived child process; an HTTP
server is reached through one pooled HTTP client. A call that finds the connection gone
closes the link, and the next call opens a new one (a new process for stdio).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
from collections.abc import Callable, Coroutine
from typing import Any

import httpcore2
import httpx2
import mcp_types
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError

from shared.mcp.store import McpConnection, redact
from shared.settings import Settings
from worker.mcp.addresses import ResponseCap, check_url, guarded_http_client, mcp_policy
from worker.mcp.elicit import CURRENT, Running, answer, until_done
from worker.mcp.stdio import BoundedStdio
from worker.tools.base import AskPerson

__all__ = ["Link", "LinkFailed"]

log = logging.getLogger(__name__)

# One message (a line on stdio, an event on HTTP): large enough for a big tool listing,
# whose tools are then checked one by one; a result is held to mcp_max_result_bytes after.
MIN_MESSAGE_BYTES = 32_000_000
_LIST_PAGES = 200  # a server that paginates forever is cut off here
ToolsChanged = Callable[[str], Coroutine[Any, Any, None]]


class LinkFailed(Exception):
    """Raised when a server cannot be reached or its connection broke; the message is safe
    to show (secrets redacted)."""


class Link:
    """The session with one server, opened on first use."""

    def __init__(
        self,
        connection: McpConnection,
        settings: Settings,
        *,
        on_tools_changed: ToolsChanged | None = None,
    ) -> None:
        self.connection = connection
        self.settings = settings
        self._on_tools_changed = on_tools_changed
        self._client: Client | None = None
        self._closing: asyncio.Event | None = None
        self._holder: asyncio.Task[None] | None = None
        self._opening = asyncio.Lock()
        self._stdio: BoundedStdio | None = None
        self._http_cap: ResponseCap | None = None
        self._running: set[Running] = set()
        self._policy = mcp_policy(settings.mcp_allowed_hosts)
        self.slots = asyncio.Semaphore(settings.mcp_max_concurrency)

    @property
    def name(self) -> str:
        return self.connection.name

    async def client(self) -> Client:
        """The open session, opening one (or reopening a dead one) first."""
        async with self._opening:
            if self._client is None or self._holder is None or self._holder.done():
                await self._open()
            assert self._client is not None
            return self._client

    async def _open(self) -> None:
        if self.connection.url is not None:
            try:
                await check_url(self.connection.url, self._policy)
            except httpcore2.ConnectError as exc:  # AddressRefused, or a name that resolves nowhere
                raise LinkFailed(f"MCP server {self.name}: {exc}") from None
        opened: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._holder = asyncio.create_task(self._hold(opened, self._closing))
        try:
            self._client = await asyncio.wait_for(
                asyncio.shield(opened), self.settings.mcp_connect_timeout_s
            )
        except TimeoutError:
            await self.close()
            limit = self.settings.mcp_connect_timeout_s
            raise LinkFailed(f"MCP server {self.name} did not start within {limit:g} s") from None
        except Exception as exc:
            await self.close()
            raise LinkFailed(self.describe(exc, "could not be reached")) from None

    async def _hold(self, opened: asyncio.Future[Client], closing: asyncio.Event) -> None:
        """Holds one session open until `closing`; what it opened, it closes (a newer
        session of this link may be open by then, and is left alone)."""
        target, http = self._target()
        mine: Client | None = None
        try:
            async with Client(
                target,
                cache=None,
                elicitation_callback=self._elicitation,
                message_handler=self._message,
            ) as client:
                mine = client
                opened.set_result(client)
                watcher = asyncio.create_task(self._watch(client))
                try:
                    await closing.wait()
                finally:
                    watcher.cancel()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            elif not isinstance(exc, asyncio.CancelledError | GeneratorExit):
                log.warning("MCP server %s: %s", self.name, self.describe(exc, "closed"))
        finally:
            if mine is not None and self._client is mine:
                self._client = None
            if http is not None:  # the SDK leaves a client it was given open
                await http.aclose()

    def _target(self) -> tuple[Any, httpx2.AsyncClient | None]:
        """What the SDK's client connects through, and the HTTP client to close after."""
        conn = self.connection
        line_limit = max(MIN_MESSAGE_BYTES, 2 * self.settings.mcp_max_result_bytes)
        if conn.url is None:
            self._stdio = BoundedStdio(conn.argv, conn.env, max_line_bytes=line_limit)
            return self._stdio, None
        self._http_cap = ResponseCap(2 * line_limit)  # one request's answer: events and result
        http = guarded_http_client(
            self._policy,
            cap=self._http_cap,
            headers=conn.headers,
            timeout=httpx2.Timeout(self.settings.mcp_call_timeout_s + 5),
            follow_redirects=False,
        )
        transport = streamable_http_client(
            conn.url, http_client=http, max_sse_event_size=line_limit
        )
        return transport, http

    async def close(self) -> None:
        """Ends the session (and a stdio server's process); the next call opens a new one."""
        closing, holder = self._closing, self._holder
        self._client, self._holder = None, None
        if closing is not None:
            closing.set()
        if holder is not None and not holder.done():
            try:
                await asyncio.wait_for(holder, 5)
            except (TimeoutError, Exception):
                holder.cancel()

    async def _watch(self, client: Client) -> None:
        """Listens for the server's tool-list changes (the current revision's way; an older
        server's notifications arrive through `_message` instead)."""
        if self._on_tools_changed is None:
            return
        try:
            async with client.listen(tools_list_changed=True) as changes:
                async for _ in changes:
                    await self._on_tools_changed(self.name)
        except ListenNotSupportedError:
            return
        except Exception as exc:  # a server without listen support: refresh still works
            log.info("MCP server %s: not listening for tool changes: %s", self.name, _detail(exc))

    async def _message(self, message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method == "notifications/tools/list_changed" and self._on_tools_changed is not None:
            await self._on_tools_changed(self.name)

    async def _elicitation(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        return await answer(self.name, params, self._running, self.settings)

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every page of the server's tool list, as wire dicts, up to a page and count cap."""
        client = await self.client()
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            found.extend(
                tool.model_dump(mode="json", by_alias=True, exclude_none=True)
                for tool in page.tools
            )
            cursor = page.next_cursor
            if cursor is None or len(found) > self.settings.mcp_max_tools:
                break
        return found

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        ask: AskPerson | None = None,
        responses: dict[str, Any] | None = None,
        request_state: str | None = None,
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        """One round of a tool call with the call timeout (standing still while a person is
        asked for an older server's input); LinkFailed when the connection broke.

        An input-required result is returned as it is (the caller parks or declines);
        `responses` and `request_state` answer the previous round's.
        """
        loop = asyncio.get_running_loop()
        async with self.slots:
            client = await self.client()
            running = Running(ask, loop.time() + self.settings.mcp_call_timeout_s)
            token = CURRENT.set(running)
            self._running.add(running)
            try:
                task = asyncio.ensure_future(
                    client.session.call_tool(
                        tool,
                        arguments,
                        input_responses=responses,
                        request_state=request_state,
                        allow_input_required=True,
                    )
                )
                return await until_done(task, running)
            except TimeoutError:
                raise
            except MCPError as exc:
                if exc.code == mcp_types.REQUEST_TIMEOUT:
                    raise TimeoutError from None
                oversized = self._oversized()
                if exc.code == mcp_types.CONNECTION_CLOSED:
                    await self.close()
                raise LinkFailed(self.describe(exc, "failed the call", oversized)) from None
            except Exception as exc:
                await self.close()
                raise LinkFailed(self.describe(exc, "failed the call")) from None
            finally:
                CURRENT.reset(token)
                self._running.discard(running)

    def _oversized(self) -> str:
        """Why the transport cut the connection, when it refused a message over its bound."""
        if self._stdio is not None:
            return self._stdio.oversized
        return self._http_cap.oversized if self._http_cap is not None else ""

    def describe(self, exc: BaseException, what: str, detail: str = "") -> str:
        """An error as the model and the operator may read it: secrets redacted."""
        detail = detail or _detail(exc)
        return redact(f"MCP server {self.name} {what}: {detail}", self.connection.secrets())


def _detail(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = [_detail(e) for e in exc.exceptions]
        return "; ".join(inner) if inner else type(exc).__name__
    if isinstance(exc, subprocess.SubprocessError | OSError) and not str(exc):
        return type(exc).__name__
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
