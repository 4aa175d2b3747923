"""The current revision's multi-round-trip input requests: a call that needs a person parks.

A server that needs input answers `tools/call` with an input-required result (its input
requests and an opaque request state) instead of a result. When it asks one question a
person can answer (one form elicitation with a schema `check_schema` accepts), the call
parks: `InputNeeded` carries the question and, as the call's state, the request's key and
request state; no worker waits. Resumed, the call is sent again with the person's answer
(`accept` with the content, or `decline`) and the request state. Anything else it asks
(a URL to open, a model to sample, several questions at once) is declined at once, in
the same call.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types

from shared.errors import InvalidInput
from shared.schema import check_schema
from worker.tools.base import InputNeeded, Resumed

__all__ = ["MAX_ROUNDS", "Round", "declined", "parked", "resumed_round"]

MAX_ROUNDS = 8  # input rounds of one call before it fails (a server that never finishes)

Round = tuple[dict[str, Any] | None, str | None, int]  # (input responses, request state, rounds)
_DECLINE = mcp_types.ElicitResult(action="decline")


def resumed_round(resumed: Resumed | None) -> Round:
    """What the first request of a (resumed) call carries."""
    if resumed is None:
        return None, None, 0
    saved = json.loads(resumed.state)
    answer = (
        _DECLINE
        if resumed.answer is None
        else mcp_types.ElicitResult(action="accept", content=resumed.answer)
    )
    return {saved["key"]: answer}, saved.get("request_state"), int(saved.get("rounds", 0))


def parked(server: str, result: mcp_types.InputRequiredResult, rounds: int) -> InputNeeded | None:
    """The question the call parks on, or None when the request is not one to park on."""
    requests = result.input_requests or {}
    if len(requests) != 1:
        return None
    [(key, request)] = requests.items()
    params = getattr(request, "params", None)
    if not isinstance(params, mcp_types.ElicitRequestFormParams):
        return None
    schema = dict(params.requested_schema)
    try:
        check_schema(schema, name="requested schema")
    except InvalidInput:
        return None
    state = json.dumps({"key": key, "request_state": result.request_state, "rounds": rounds})
    return InputNeeded(f"MCP server {server} asks: {params.message}", schema, state)


def declined(result: mcp_types.InputRequiredResult) -> dict[str, Any]:
    """Answers to requests that are not parked on: declined, or an empty list of roots."""
    answers: dict[str, Any] = {}
    for key, request in (result.input_requests or {}).items():
        if isinstance(request, mcp_types.ListRootsRequest):
            answers[key] = mcp_types.ListRootsResult(roots=[])
        elif isinstance(request, mcp_types.ElicitRequest):
            answers[key] = _DECLINE
        else:
            raise InvalidInput(f"it asked to {request.method}, which Signoff does not offer")
    return answers
