"""Requests to operator-registered URLs never reach the private network unless allowed.

A webhook endpoint (and an MCP server over HTTP) is a URL an operator typed: a careless or
compromised operator account must not turn every worker into a probe of loopback, private,
link-local or cloud-metadata addresses. `OutboundPolicy` says which addresses are refused
(everything not global, unless `SIGNOFF_OUTBOUND_ALLOW` names the host or a network holding
the address). `guarded_client` is an httpx client whose connections are checked when they
are made: the host is resolved once, every address it resolves to is checked, and the
socket is opened to a checked address, so a name that resolves elsewhere a moment later
(DNS rebinding) cannot slip past. TLS still verifies the certificate against the host name.
A refusal is an `httpx.ConnectError` naming the host, the address and the setting.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from shared.errors import InvalidInput

__all__ = ["ALLOW_SETTING", "OutboundPolicy", "OutboundRefused", "guarded_client"]

ALLOW_SETTING = "SIGNOFF_OUTBOUND_ALLOW"

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(httpcore.ConnectError):
    """Raised when a connection would reach an address the operator has not allowed."""


def _internal(address: IpAddress) -> bool:
    """Loopback, private, link-local (cloud metadata), reserved, multicast or unspecified."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast or address.is_unspecified


@dataclass(frozen=True)
class OutboundPolicy:
    """Which resolved addresses an outbound request may connect to."""

    allowed: tuple[str, ...] = ()
    setting: str = ALLOW_SETTING

    def refusal(self, host: str, address: IpAddress) -> str | None:
        """Why connecting to `address` (for `host`) is refused, or None when it is allowed."""
        if not _internal(address) or self._allows(host, address):
            return None
        return (
            f"{host} resolves to {address}, a loopback, private, link-local or metadata "
            f"address; allow it with {self.setting}"
        )

    def _allows(self, host: str, address: IpAddress) -> bool:
        for entry in self.allowed:
            if entry.lower() == host.lower().rstrip("."):
                return True
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        return False

    def resolve(self, host: str, port: int) -> list[IpAddress]:
        """Every address `host` resolves to, each allowed, else OutboundRefused naming one."""
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:  # UnicodeError: a label over 63 characters
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
        for address in addresses:
            reason = self.refusal(host, address)
            if reason is not None:
                raise OutboundRefused(reason)
        return addresses

    def check_url(self, url: str, *, field: str = "url") -> None:
        """InvalidInput naming `field` when `url`'s host resolves to a refused address.

        For registration, so an operator learns at once; a name that does not resolve here is
        let through (the worker checks again at every connection).
        """
        try:
            parts = urlsplit(url)
            host, port = (
                parts.hostname or "",
                parts.port or (443 if parts.scheme == "https" else 80),
            )
        except ValueError:  # no host to resolve ("http://]x"): a worker cannot reach it either
            return
        try:
            self.resolve(host, port)
        except OutboundRefused as exc:
            raise InvalidInput(f"{field}: {exc}") from None
        except httpcore.ConnectError:
            return


class _GuardedBackend(httpcore.NetworkBackend):
    """httpcore's network backend, connecting only to addresses the policy allows."""

    def __init__(self, inner: httpcore.NetworkBackend, policy: OutboundPolicy) -> None:
        self._inner = inner
        self._policy = policy

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = self._policy.resolve(host, port)
        last: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                last = exc
        raise last or httpcore.ConnectError(f"{host} resolves to no address")

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        raise OutboundRefused("outbound requests do not use unix sockets")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def guarded_client(policy: OutboundPolicy, **options: Any) -> httpx.Client:
    """An httpx client whose every connection is checked by `policy` as it is made.

    Proxies from the environment are not used: a proxy would connect on the request's behalf,
    out of the check's sight.
    """
    transport = httpx.HTTPTransport()
    pool = transport._pool  # httpx exposes no backend option; the pool takes one
    pool._network_backend = _GuardedBackend(pool._network_backend, policy)
    return httpx.Client(transport=transport, trust_env=False, **options)
