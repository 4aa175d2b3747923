"""Outbound addresses an MCP server URL may reach: not loopback, private, link-local or
metadata addresses unless the operator allows them (SIGNOFF_MCP_ALLOWED_HOSTS).

The policy is the webhooks' (`shared.outbound`). The MCP SDK speaks HTTP through httpx2,
so its client gets the same guard for that library: every connection resolves the host
once, checks every address, and connects to a checked one, so a name that resolves
elsewhere a moment later (DNS rebinding) gains nothing. Proxies from the environment
are not used (a proxy would connect out of the check's sight).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpcore2
import httpx2

from shared.mcp.store import outbound_policy
from shared.outbound import OutboundPolicy

__all__ = [
    "AddressRefused",
    "ResponseCap",
    "ResponseTooLarge",
    "check_url",
    "guarded_http_client",
    "mcp_policy",
]


class AddressRefused(httpcore2.ConnectError):
    """Raised when a connection would reach an address operators have not allowed."""


def mcp_policy(allowed: Sequence[str]) -> OutboundPolicy:
    return outbound_policy(allowed)


async def _checked(policy: OutboundPolicy, host: str, port: int) -> list[str]:
    """Every address `host` resolves to, each allowed; AddressRefused naming one that is not."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise httpcore2.ConnectError(f"cannot resolve {host}: {exc}") from exc
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
    for address in addresses:
        reason = policy.refusal(host, address)
        if reason is not None:
            raise AddressRefused(reason)
    return [str(address) for address in addresses]


async def check_url(url: str, policy: OutboundPolicy) -> None:
    """AddressRefused naming the host and address when `url` reaches a refused address:
    before a session opens, so the operator reads why rather than the SDK's wrapping."""
    parts = urlsplit(url)
    await _checked(policy, parts.hostname or "", parts.port or 443)


class _GuardedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore2's network backend, connecting only to addresses the policy allows."""

    def __init__(self, inner: httpcore2.AsyncNetworkBackend, policy: OutboundPolicy) -> None:
        self._inner = inner
        self._policy = policy

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        last: Exception | None = None
        for address in await _checked(self._policy, host, port):
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore2.ConnectError as exc:
                last = exc
        raise last or httpcore2.ConnectError(f"{host} resolves to no address")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore2.AsyncNetworkStream:
        raise AddressRefused("MCP servers are not reached through unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class ResponseTooLarge(httpx2.TransportError):
    """Raised when a server's answer to one request passes the byte limit."""


class ResponseCap:
    """The most one response may hold, and what the last refusal said (the SDK swallows the
    error and reports a closed connection: the link reads the reason here)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.oversized = ""

    def refuse(self) -> ResponseTooLarge:
        self.oversized = f"its answer is over {self.limit:,} bytes and was not read further"
        return ResponseTooLarge(self.oversized)


class _CappedStream(httpx2.AsyncByteStream):
    """A response body read no further than the cap, whatever its framing."""

    def __init__(self, inner: httpx2.AsyncByteStream, cap: ResponseCap) -> None:
        self._inner, self._cap = inner, cap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._inner:
            read += len(chunk)
            if read > self._cap.limit:
                raise self._cap.refuse()
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx2.AsyncBaseTransport):
    """Every response body bounded: a plain JSON answer is read whole by the SDK, so the
    bound must hold below it, not only on SSE events."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, cap: ResponseCap) -> None:
        self._inner, self._cap = inner, cap

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._cap.limit:
            await response.aclose()
            raise self._cap.refuse()
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _CappedStream(response.stream, self._cap)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_http_client(
    policy: OutboundPolicy, *, cap: ResponseCap | None = None, **options: Any
) -> httpx2.AsyncClient:
    """An httpx2 client whose every connection is checked by `policy` as it is made, and whose
    every response body is cut at `cap`."""
    transport = httpx2.AsyncHTTPTransport()
    pool = transport._pool  # httpx2 exposes no backend option; the pool takes one
    pool._network_backend = _GuardedBackend(pool._network_backend, policy)
    outer: httpx2.AsyncBaseTransport = transport
    if cap is not None:
        outer = _CappedTransport(transport, cap)
    return httpx2.AsyncClient(transport=outer, trust_env=False, **options)
