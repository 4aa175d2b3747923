"""A server's request for input during a call, answered by a person through the inbox.

A call in flight carries a `Running` record (in a context variable, and in its link's set):
the deadline of its timeout, and how to ask a person (`ToolContext.ask`). An input request
(the current revision's input-required result, which the SDK's client hands to the
elicitation callback in the calling task; or an older server's `elicitation/create`, which
arrives in the session's task, so it is matched to the one call in flight) becomes an inbox
question; the call's timeout stands still while the person is asked. A Submit is the
`accept` with its content, a Deny or an expiry a `decline`; a URL request, a schema that
cannot be asked, or a request no call can be matched to is declined at once.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import mcp_types

from shared.errors import InvalidInput
from shared.models.notifications import Submit
from shared.settings import Settings
from worker.tools.base import AskPerson

__all__ = ["CURRENT", "Running", "answer", "until_done"]

T = TypeVar("T")


@dataclass(eq=False)
class Running:
    """One call in flight: its timeout's deadline (loop time), and its way to ask a person."""

    ask: AskPerson | None
    deadline: float
    asking: int = field(default=0)


CURRENT: contextvars.ContextVar[Running | None] = contextvars.ContextVar("mcp_call", default=None)
_DECLINE = mcp_types.ElicitResult(action="decline")


async def until_done(task: asyncio.Future[T], running: Running) -> T:
    """The call's result; TimeoutError (the call cancelled) once its deadline passes while
    no person is being asked."""
    loop = asyncio.get_running_loop()
    while True:
        wait = 0.5 if running.asking else max(0.0, running.deadline - loop.time())
        done, _ = await asyncio.wait({task}, timeout=wait)
        if done:
            return task.result()
        if not running.asking and loop.time() >= running.deadline:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise TimeoutError


def _matched(in_flight: Iterable[Running]) -> Running | None:
    found = CURRENT.get()
    if found is not None:
        return found
    calls = list(in_flight)
    return calls[0] if len(calls) == 1 else None


async def answer(
    server: str,
    params: mcp_types.ElicitRequestParams,
    in_flight: Iterable[Running],
    settings: Settings,
) -> mcp_types.ElicitResult:
    """What the person answered, as the server's elicitation result."""
    running = _matched(in_flight)
    if running is None or running.ask is None:
        return _DECLINE
    if not isinstance(params, mcp_types.ElicitRequestFormParams):
        return _DECLINE  # a URL to open elsewhere: not something the inbox can do
    loop = asyncio.get_running_loop()
    title = f"MCP server {server} asks for input"
    running.asking += 1
    started = loop.time()
    try:
        resolution = await loop.run_in_executor(
            None,
            running.ask,
            title,
            params.message,
            dict(params.requested_schema),
            settings.mcp_elicit_wait_s,
        )
    except InvalidInput:
        return _DECLINE
    finally:
        running.asking -= 1
        running.deadline += loop.time() - started
    if isinstance(resolution, Submit) and isinstance(resolution.content, dict):
        return mcp_types.ElicitResult(action="accept", content=resolution.content)
    return _DECLINE
