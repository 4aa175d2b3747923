"""/api/v1/mcp/servers and the MCP page: operators write, every role reads, bad input is
named, secrets never come back, and the listed tools show with hints and policies."""

from __future__ import annotations

from flask.testing import FlaskClient

from shared.mcp.catalog import build_listing
from shared.mcp.store import McpServerStore
from shared.models.config import ToolPolicy
from shared.store.policy import PolicyRule
from tests.web.conftest import body_validator, new_conversation, page_csrf
from webui.services import Services

SERVERS = "/api/v1/mcp/servers"
NOTES = {
    "name": "notes",
    "command": "python -m notes_server --verbose",
    "env": {"NOTES_TOKEN": "tok-very-secret"},
    "trusted": True,
}
LISTED = [
    {
        "name": "list_notes",
        "description": "Lists notes.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "delete_note",
        "description": "Deletes one.",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
        "annotations": {"destructiveHint": True},
    },
    {"name": "bad", "inputSchema": {"type": "object", "properties": {"s": {"pattern": "(?=x)"}}}},
]


def _listed(svc: Services) -> None:
    """What a worker records once it has listed the server's tools."""
    store = McpServerStore(svc.redis, svc.keys)
    store.record_listing("notes", build_listing("notes", LISTED, max_tools=256))


def test_operators_register_and_every_role_reads_without_secrets(
    http: FlaskClient, operator: dict[str, str], viewer: dict[str, str], svc: Services
) -> None:
    created = http.post(SERVERS, json=NOTES, headers=operator)
    assert created.status_code == 201, created.text
    assert created.headers["Location"].endswith("/api/v1/mcp/servers/notes")
    assert created.json["state"] == "pending" and created.json["env_keys"] == ["NOTES_TOKEN"]
    assert "tok-very-secret" not in created.text
    _listed(svc)
    shown = http.get(f"{SERVERS}/notes", headers=viewer)
    assert shown.status_code == 200 and "tok-very-secret" not in shown.text
    body = shown.json
    assert body["state"] == "connected" and body["tools_version"] == 1
    assert body["policies"] == {"notes__list_notes": "auto", "notes__delete_note": "ask"}
    refused = {t["name"]: t["problem"] for t in body["tools"] if t["problem"]}
    assert "re2" in refused["bad"]
    listed = http.get(SERVERS, headers=viewer).json["items"]
    assert [s["name"] for s in listed] == ["notes"] and "tok-very-secret" not in str(listed)
    again = http.post(f"{SERVERS}/notes/refresh", headers=operator)
    assert again.status_code == 202
    removed = http.delete(f"{SERVERS}/notes", headers=operator)
    assert removed.status_code == 200
    assert http.get(f"{SERVERS}/notes", headers=viewer).status_code == 404
    assert "notes__list_notes" not in svc.policies.catalog()


def test_bad_servers_are_refused_naming_the_field(
    http: FlaskClient, operator: dict[str, str]
) -> None:
    for body, words in [
        ({**NOTES, "name": "two__parts"}, "name"),
        ({**NOTES, "url": "https://mcp.example.test/mcp"}, "exactly one"),
        ({"name": "x"}, "exactly one"),
        ({"name": "x", "url": "ftp://mcp.example.test/"}, "url"),
        ({"name": "x", "url": "https://h.test/", "headers": {"bad key": "v"}}, "headers"),
        ({"name": "x", "url": "https://h.test/", "env": {"A": "b"}}, "env is for a command"),
        ({"name": "x", "command": "'unclosed"}, "does not split"),
        ({**NOTES, "extra": 1}, "extra"),
    ]:
        answer = http.post(SERVERS, json=body, headers=operator)
        assert answer.status_code == 422, (body, answer.text)
        assert words in answer.text, answer.text
    for url in ("http://127.0.0.1:9/mcp", "http://169.254.169.254/latest", "http://[::1]/mcp"):
        inside = http.post(SERVERS, json={"name": "inside", "url": url}, headers=operator)
        assert inside.status_code == 422, inside.text
        assert "url:" in inside.text and "SIGNOFF_MCP_ALLOWED_HOSTS" in inside.text
    assert http.post(SERVERS, data="nope", headers=operator).status_code == 400
    assert http.post(SERVERS, json=NOTES, headers=operator).status_code == 201
    duplicate = http.post(SERVERS, json=NOTES, headers=operator)
    assert duplicate.status_code == 409 and "already registered" in duplicate.text
    assert http.get(f"{SERVERS}/nope", headers=operator).status_code == 404
    assert http.delete(f"{SERVERS}/nope", headers=operator).status_code == 404
    assert http.get(f"{SERVERS}/bad__name", headers=operator).status_code == 404


def test_only_operators_write(
    http: FlaskClient, viewer: dict[str, str], submitter: dict[str, str]
) -> None:
    for caller in (viewer, submitter):
        assert http.post(SERVERS, json=NOTES, headers=caller).status_code == 403
        assert http.delete(f"{SERVERS}/notes", headers=caller).status_code == 403
        assert http.post(f"{SERVERS}/notes/refresh", headers=caller).status_code == 403
        assert http.get(SERVERS, headers=caller).status_code == 200
    assert http.get(SERVERS).status_code == 401


def test_a_submitter_may_select_servers_but_only_tighten(
    http: FlaskClient, operator: dict[str, str], submitter: dict[str, str], svc: Services
) -> None:
    http.post(SERVERS, json=NOTES, headers=operator)
    _listed(svc)
    cid = new_conversation(http, submitter, mcp=["notes", "notes/delete_note"])
    config = http.get(f"/api/v1/conversations/{cid}", headers=submitter).json["config"]
    assert config["mcp"] == ["notes", "notes/delete_note"]
    looser = http.post(
        "/api/v1/conversations",
        json={"mcp": ["notes"], "tools": {"notes__delete_note": "auto"}},
        headers=submitter,
    )
    assert looser.status_code == 403 and "tools.notes__delete_note" in looser.text
    tighter = http.post(
        "/api/v1/conversations",
        json={"mcp": ["notes"], "tools": {"notes__list_notes": "ask"}},
        headers=submitter,
    )
    assert tighter.status_code == 201
    bad = http.post("/api/v1/conversations", json={"mcp": ["no spaces allowed"]}, headers=submitter)
    assert bad.status_code == 422 and "mcp" in bad.text


def test_the_pages_show_tools_with_hints_and_effective_policy(
    signed_in: FlaskClient, svc: Services
) -> None:
    from shared.models.mcp import McpServerRequest

    store = McpServerStore(svc.redis, svc.keys)
    store.add(McpServerRequest.model_validate(NOTES), actor="test")
    _listed(svc)
    svc.policies.set(PolicyRule(tool="notes__list_notes", policy=ToolPolicy.DENY), actor="t")
    page = signed_in.get("/mcp-servers").text
    assert "notes__list_notes" in page and "read-only" in page and "destructive" in page
    assert "policy-deny" in page and "tok-very-secret" not in page
    assert "Refused:" in page and "NOTES_TOKEN" in page
    policy = signed_in.get("/policy").text
    assert "notes__delete_note" in policy and "MCP server notes: destructive" in policy


def test_an_agent_names_servers_and_its_conversations_get_them(
    http: FlaskClient, operator: dict[str, str], submitter: dict[str, str], svc: Services
) -> None:
    http.post(SERVERS, json=NOTES, headers=operator)
    _listed(svc)
    agent = {"name": "notetaker", "mcp": ["notes/list_notes"]}
    assert http.post("/api/v1/agents", json=agent, headers=operator).status_code == 201
    looser = {"name": "rogue", "mcp": ["notes"], "tools": {"notes__delete_note": "auto"}}
    refused = http.post("/api/v1/agents", json=looser, headers=operator)
    assert refused.status_code == 422 and "tools.notes__delete_note" in refused.text
    cid = new_conversation(http, submitter, agent="notetaker")
    config = http.get(f"/api/v1/conversations/{cid}", headers=submitter).json["config"]
    assert config["mcp"] == ["notes/list_notes"] and config["agent"] == "notetaker"
    policies = http.get(f"/api/v1/conversations/{cid}", headers=submitter).json["tool_policy"]
    assert policies["notes__list_notes"] == "auto" and policies["notes__delete_note"] is None
    bad = http.post("/api/v1/agents", json={"name": "x", "mcp": ["a b"]}, headers=operator)
    assert bad.status_code == 422 and "mcp" in bad.text


def test_an_mcp_selection_is_refused_exactly_when_the_document_refuses_it(
    http: FlaskClient, operator: dict[str, str]
) -> None:
    """Schemathesis's finding: a tool name holding U+0085 matched the document's `[^\\s/]` as
    ECMA-262 reads it, not as pydantic (Rust) does; U+001C is the other way round in Python.
    The pattern now writes its whitespace out (`str.isspace`'s), read alike by every engine."""
    takes = body_validator(http, operator, "post", "/api/v1/agents")
    odd = ["\x85", "\x1c", "\x1f", "\xa0", "\u2028", "\u3000", "\ufeff", "\x07", "é", "🙂"]
    for n, character in enumerate([*odd, " ", "\t"]):
        body = {"name": f"picky-{n}", "mcp": ["notes", f"notes/a{character}b"]}
        expected = character not in " \t" and not character.isspace()
        assert takes.is_valid(body) is expected, repr(character)
        answer = http.post("/api/v1/agents", json=body, headers=operator)
        assert answer.status_code == (201 if expected else 422), (repr(character), answer.text)
    refused = http.post("/api/v1/agents", json={"name": "x", "mcp": ["a/\x1c"]}, headers=operator)
    assert refused.status_code == 422 and refused.json["error"]["details"][0]["loc"][0] == "mcp"


def test_operators_add_and_remove_servers_on_the_page(
    signed_in: FlaskClient, svc: Services
) -> None:
    token = page_csrf(signed_in)
    form = {
        "csrf_token": token,
        "name": "pagenotes",
        "transport": "command",
        "target": "python -m notes_server",
        "pairs": "NOTES_TOKEN=page-very-secret\n\nOTHER=x",
        "trusted": "on",
    }
    added = signed_in.post("/mcp-servers", data=form, follow_redirects=True)
    assert added.status_code == 200 and "Added pagenotes" in added.text
    assert "NOTES_TOKEN, OTHER (hidden)" in added.text and "page-very-secret" not in added.text
    stored = McpServerStore(svc.redis, svc.keys)
    assert stored.connection("pagenotes").env == {"NOTES_TOKEN": "page-very-secret", "OTHER": "x"}
    assert stored.get("pagenotes").trusted
    for bad, words in [
        ({**form, "name": "two__parts"}, "name"),
        ({**form, "name": "x", "pairs": "novalue"}, "KEY=VALUE"),
        ({**form, "name": "x", "transport": "url", "target": "http://127.0.0.1:9/"}, "127.0.0.1"),
        ({**form}, "already registered"),
    ]:
        refused = signed_in.post("/mcp-servers", data=bad, follow_redirects=True)
        assert "Not added" in refused.text and words in refused.text, words
    without = signed_in.post("/mcp-servers", data={**form, "csrf_token": ""})
    assert without.status_code in (400, 403)
    removed = signed_in.post(
        "/mcp-servers/pagenotes/remove", data={"csrf_token": token}, follow_redirects=True
    )
    assert "Removed pagenotes" in removed.text
    assert [s.name for s in stored.all()] == []
