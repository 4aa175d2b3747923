"""The pure rules of MCP tools: listing checks, names, default policies, selection, the store."""

from __future__ import annotations

import asyncio
import json

import mcp_types
import pytest
import redis

from shared.mcp.catalog import build_listing
from shared.mcp.selection import selected_servers, selects
from shared.mcp.store import McpServerStore, redact
from shared.models.config import ConversationConfig, ToolPolicy
from shared.models.mcp import McpServerRequest, McpServerState, McpToolAnnotations, default_policy
from shared.models.steps import ToolCall
from shared.store.keys import KeySpace
from shared.store.policy import OperatorPolicy, PolicyRule, effective_policy
from worker.mcp.addresses import AddressRefused, check_url, mcp_policy
from worker.mcp.rounds import declined, parked, resumed_round
from worker.tool_ledger import ToolLedger
from worker.tools.base import Resumed

OBJECT = {"type": "object", "properties": {}}


def _tool(name: str, **extra: object) -> dict[str, object]:
    return {"name": name, "inputSchema": OBJECT, **extra}


def test_each_bad_tool_is_refused_on_its_own_and_the_rest_are_offered() -> None:
    listing = build_listing(
        "srv",
        [
            _tool("ok", annotations={"readOnlyHint": True, "title": 5}),
            _tool("ok"),
            _tool("a.b"),
            _tool("a_b"),
            _tool("x" * 70),
            {"name": "", "inputSchema": OBJECT},
            {"name": "noschema"},
            {"name": "array", "inputSchema": {"type": "array"}},
            _tool(
                "deep", inputSchema={"type": "object", "properties": {"p": {"pattern": "(a)\\1"}}}
            ),
        ],
        max_tools=100,
    )
    offered = {t.name: t.exposed for t in listing.tools if not t.problem}
    assert offered == {"ok": "srv__ok", "a.b": "srv__a_b"}
    problems = [t.problem for t in listing.tools if t.problem]
    assert len(problems) == 7 and listing.problems == []
    assert listing.tools[0].annotations == McpToolAnnotations(read_only=True)


def test_more_tools_than_the_limit_are_cut_with_a_problem() -> None:
    listing = build_listing("srv", [_tool(f"t{i}") for i in range(10_000)], max_tools=3)
    assert [t.exposed for t in listing.tools] == ["srv__t0", "srv__t1", "srv__t2"]
    assert "more than 3 tools" in listing.problems[0]


def test_auto_only_for_read_only_tools_of_trusted_servers() -> None:
    read_only = McpToolAnnotations(read_only=True)
    assert default_policy(read_only, trusted=True) is ToolPolicy.AUTO
    assert default_policy(read_only, trusted=False) is ToolPolicy.ASK
    assert default_policy(McpToolAnnotations(), trusted=True) is ToolPolicy.ASK
    destructive = McpToolAnnotations(read_only=False, destructive=True)
    assert default_policy(destructive, trusted=True) is ToolPolicy.ASK


def test_selection_and_the_operator_rules_apply_to_mcp_tools() -> None:
    assert selects(["notes"], "notes", "delete")
    assert selects(["notes/delete"], "notes", "delete")
    assert not selects(["notes/list"], "notes", "delete")
    assert selected_servers(["a/x", "b", "a"]) == ["a", "b"]
    config = ConversationConfig(tools={"calculator": ToolPolicy.AUTO}, mcp=["notes"])
    rules = OperatorPolicy((PolicyRule(tool="notes__rm", policy=ToolPolicy.DENY),))
    decide = {"operator": OperatorPolicy(), "config": config}
    # the tools map does not disable a selected MCP tool, only tightens it
    assert effective_policy("notes__ls", default=ToolPolicy.AUTO, enabled=True, **decide) is (
        ToolPolicy.AUTO
    )
    assert effective_policy("notes__ls", default=ToolPolicy.AUTO, enabled=False, **decide) is None
    denied = effective_policy(
        "notes__rm", default=ToolPolicy.AUTO, operator=rules, config=config, enabled=True
    )
    assert denied is ToolPolicy.DENY


def test_the_store_bumps_the_version_only_when_the_tools_change(
    fake_redis: redis.Redis,
) -> None:
    store = McpServerStore(fake_redis, KeySpace("u"))
    request = McpServerRequest(name="srv", url="https://h.test/mcp", headers={"X-Key": "abcd1234"})
    store.add(request, actor="t")
    assert store.get("srv").state is McpServerState.PENDING
    listing = build_listing("srv", [_tool("a")], max_tools=10)
    assert store.record_listing("srv", listing).tools_version == 1
    assert store.record_listing("srv", listing).tools_version == 1
    changed = build_listing("srv", [_tool("b")], max_tools=10)
    assert store.record_listing("srv", changed).tools_version == 2
    failing = store.record_failure("srv", "boom")
    assert failing is not None and failing.state is McpServerState.FAILING
    assert [t.name for t in failing.tools] == ["b"]
    assert "abcd1234" not in store.get("srv").model_dump_json()
    assert store.connection("srv").headers == {"X-Key": "abcd1234"}
    assert redact("sent abcd1234 to h", store.connection("srv").secrets()) == "sent *** to h"


def test_internal_addresses_are_refused_unless_allowed() -> None:
    with pytest.raises(AddressRefused, match="SIGNOFF_MCP_ALLOWED_HOSTS"):
        asyncio.run(check_url("http://127.0.0.1:9/mcp", mcp_policy(())))
    with pytest.raises(AddressRefused, match=r"169\.254\.169\.254"):
        asyncio.run(check_url("http://169.254.169.254/latest", mcp_policy(("127.0.0.1",))))
    asyncio.run(check_url("http://127.0.0.1:9/mcp", mcp_policy(("127.0.0.0/8",))))
    asyncio.run(check_url("http://localhost:9/mcp", mcp_policy(("localhost",))))


def test_a_call_held_for_input_is_claimed_once_more_then_never(fake_redis: redis.Redis) -> None:
    ledger = ToolLedger(fake_redis, KeySpace("u"), "c1")
    call = ToolCall(id="k1", name="srv__ask", args={})
    assert ledger.claim("k1")
    assert ledger.resume("k1") is None  # started, not held: it never runs again
    ledger.hold_for_input("k1", '{"key": "name"}')
    assert not ledger.claim("k1")
    assert "effect is unknown" in ledger.recorded(call).error  # a fresh run finds it taken
    assert ledger.resume("k1") == '{"key": "name"}'
    assert ledger.resume("k1") is None  # claimed again: a second resume finds it started
    assert ledger.resume("never") is None


def test_an_input_required_result_parks_on_one_form_question_only() -> None:
    ask = mcp_types.ElicitRequest(
        params=mcp_types.ElicitRequestFormParams(
            message="Name?", requested_schema={"type": "object", "properties": {}}
        )
    )
    one = mcp_types.InputRequiredResult(input_requests={"n": ask}, request_state="s1")
    need = parked("srv", one, 1)
    assert need is not None and need.question == "MCP server srv asks: Name?"
    assert json.loads(need.state) == {"key": "n", "request_state": "s1", "rounds": 1}
    two = mcp_types.InputRequiredResult(input_requests={"a": ask, "b": ask})
    assert parked("srv", two, 1) is None
    assert declined(two) == {"a": mcp_types.ElicitResult(action="decline")} | {
        "b": mcp_types.ElicitResult(action="decline")
    }
    responses, state, rounds = resumed_round(Resumed(state=need.state, answer={"name": "Ada"}))
    assert responses == {"n": mcp_types.ElicitResult(action="accept", content={"name": "Ada"})}
    assert (state, rounds) == ("s1", 1)
    declined_again, _, _ = resumed_round(Resumed(state=need.state, answer=None))
    assert declined_again == {"n": mcp_types.ElicitResult(action="decline")}
