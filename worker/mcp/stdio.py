"""A stdio transport for MCP servers whose every message is bounded in size.

The SDK's stdio client joins a line's chunks until it sees a newline, so a server that
writes one 100 MB line holds the loop for minutes and every other server with it. This
transport reads each line with a limit (`max_line_bytes`): a longer line ends the
session and the server's process, and `oversized` says why, for the error the caller
reports. Otherwise it speaks as the SDK's does: one JSON-RPC message per line.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
import mcp_types
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

__all__ = ["BoundedStdio"]

log = logging.getLogger(__name__)

_EXIT_GRACE_S = 2.0


class BoundedStdio:
    """Starts `argv` and speaks MCP over its stdin and stdout (a `Transport`)."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], *, max_line_bytes: int) -> None:
        self.argv = list(argv)
        self.env = env
        self.max_line_bytes = max_line_bytes
        self.oversized = ""
        self._streams: contextlib.AbstractAsyncContextManager[object] | None = None

    async def __aenter__(self) -> object:
        self._streams = self._open()
        return await self._streams.__aenter__()

    async def __aexit__(self, *exc: object) -> bool | None:
        assert self._streams is not None
        return await self._streams.__aexit__(*exc)  # type: ignore[arg-type]

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[object]:
        process = await anyio.open_process(
            self.argv, env=get_default_environment() | self.env, stderr=subprocess.DEVNULL
        )
        to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._read, process, to_session)
            tasks.start_soon(self._write, process, from_session)
            try:
                yield from_server, to_server
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(process)
                tasks.cancel_scope.cancel()

    async def _read(
        self, process: anyio.abc.Process, to_session: anyio.abc.ObjectSendStream
    ) -> None:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        async with to_session:
            while True:
                try:
                    line = await lines.receive_until(b"\n", self.max_line_bytes)
                except anyio.DelimiterNotFound:
                    self.oversized = (
                        f"it sent a message over {self.max_line_bytes:,} bytes; "
                        "the server was stopped"
                    )
                    process.kill()
                    return
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
                    return
                if line.strip():
                    await to_session.send(_parse(line))

    async def _write(
        self, process: anyio.abc.Process, from_session: anyio.abc.ObjectReceiveStream
    ) -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    body = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(body.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            return


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def _stop(process: anyio.abc.Process) -> None:
    """Closes stdin, gives the server a moment to exit, then kills it."""
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    with anyio.move_on_after(_EXIT_GRACE_S):
        await process.wait()
        return
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    with anyio.move_on_after(_EXIT_GRACE_S):
        await process.wait()
