"""/mcp in the app itself: bearer tokens only, the API's errors in JSON, tools gated by role."""

from __future__ import annotations

import json
from typing import Any

from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.models.users import Role
from tests.web.conftest import bearer, page_csrf

HEADERS = {"Accept": "application/json, text/event-stream"}
VERSION = {"MCP-Protocol-Version": "2025-06-18"}


def rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def test_a_signed_in_session_is_not_enough(signed_in: FlaskClient) -> None:
    """Bearer tokens only: a browser's session (even with its CSRF token) is a 401."""
    csrf = {"X-CSRF-Token": page_csrf(signed_in)}
    answer = signed_in.post("/mcp", json=rpc("tools/list"), headers={**HEADERS, **csrf})
    assert answer.status_code == 401
    assert "bearer token" in answer.json["error"]["message"]


def test_tools_follow_the_token_role(http: FlaskClient, tokens: dict[Role, str]) -> None:
    viewer = {**HEADERS, **VERSION, **bearer(tokens[Role.VIEWER])}
    listed = http.post("/mcp", json=rpc("tools/list"), headers=viewer)
    assert listed.status_code == 200, listed.text
    names = {tool["name"] for tool in listed.json["result"]["tools"]}
    assert names == {"get_conversation", "list_pending_approvals"}
    call = rpc("tools/call", {"name": "resolve_approval", "arguments": {}})
    refused = http.post("/mcp", json=call, headers=viewer)
    result = refused.json["result"]
    assert result["isError"] is True
    assert "resolve_approval needs the approver role" in result["content"][0]["text"]

    operator = {**HEADERS, **VERSION, **bearer(tokens[Role.OPERATOR])}
    listed = http.post("/mcp", json=rpc("tools/list"), headers=operator)
    tools = {tool["name"]: tool for tool in listed.json["result"]["tools"]}
    assert set(tools) == {
        "start_conversation",
        "get_conversation",
        "list_pending_approvals",
        "resolve_approval",
    }
    schema = tools["resolve_approval"]["inputSchema"]
    assert schema["required"] == ["approval_id", "decision"]
    assert schema["additionalProperties"] is False
    assert tools["get_conversation"]["annotations"]["readOnlyHint"] is True


def test_an_unknown_id_is_a_tool_error_naming_it(
    http: FlaskClient, tokens: dict[Role, str]
) -> None:
    viewer = {**HEADERS, **VERSION, **bearer(tokens[Role.VIEWER])}
    call = rpc(
        "tools/call", {"name": "get_conversation", "arguments": {"conversation_id": "ghost"}}
    )
    result = http.post("/mcp", json=call, headers=viewer).json["result"]
    assert result["isError"] is True and "ghost" in result["content"][0]["text"]
    bad = rpc("tools/call", {"name": "get_conversation", "arguments": {"conversation_id": "a b"}})
    result = http.post(
        "/mcp", data=json.dumps(bad), headers={**viewer, "Content-Type": "application/json"}
    ).json["result"]
    assert result["isError"] is True and "conversation_id" in result["content"][0]["text"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
TOOL_NAMES = st.sampled_from(
    ["start_conversation", "get_conversation", "list_pending_approvals", "resolve_approval"]
)
ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "prompt": JSON,
        "conversation_id": JSON,
        "turn_id": JSON,
        "approval_id": JSON,
        "decision": st.sampled_from(["allow", "deny", "submit"]) | JSON,
        "arguments": JSON,
        "reason": JSON,
        "tools": JSON,
        "limit": JSON,
        "min_age_s": JSON,
    },
)


def sendable(value: Any) -> bool:
    """A string an HTTP header can carry: printable, within latin-1."""
    return isinstance(value, str) and value.isprintable() and all(ord(c) < 256 for c in value)


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    method=st.sampled_from(["tools/call", "tools/list", "initialize", "ping"])
    | st.text(max_size=12),
    name=TOOL_NAMES | JSON,
    arguments=ARGUMENTS | JSON,
    modern=st.booleans(),
    role=st.sampled_from([Role.VIEWER, Role.SUBMITTER, Role.OPERATOR]),
)
def test_no_message_is_a_500(
    http: FlaskClient,
    tokens: dict[Role, str],
    method: Any,
    name: Any,
    arguments: Any,
    modern: bool,
    role: Role,
) -> None:
    """Whatever a host sends (tool names, arguments of any shape, either era): a 4xx, or a
    JSON-RPC answer (a tool error for bad arguments); never a 500."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    headers = {**HEADERS, **bearer(tokens[role])}
    if modern:
        params["_meta"] = MODERN_META
        headers["MCP-Protocol-Version"] = "2026-07-28"
        for header, value in (("Mcp-Method", method), ("Mcp-Name", name)):
            if sendable(value):  # the routing headers, where HTTP can carry them
                headers[header] = value
    else:
        headers.update(VERSION)
    answer = http.post("/mcp", json={**rpc(str(method)), "params": params}, headers=headers)
    assert answer.status_code < 500, answer.text
    if answer.status_code == 200 and method == "tools/call":
        assert "result" in answer.json or "error" in answer.json
