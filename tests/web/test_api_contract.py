"""The OpenAPI document and the server agree: a request the document allows is not refused
as malformed (400, 413, 422), and one it does not allow is.

Found by schemathesis over the document (`python -m fuzz.api`, docs/fuzzing.md); these are
its findings, kept as cases, and a walk of every query parameter the document declares.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from jsonschema import Draft202012Validator, FormatChecker

from shared.models.notifications import Notification
from tests.web.conftest import AppFactory, new_conversation, submit_batch
from webui.api.openapi import build_document
from webui.queries import EventsQuery
from webui.services import Services

REFUSED = (400, 413, 422)
OPENAPI = "/api/v1/openapi.json"


@pytest.fixture
def document(http: FlaskClient, operator: dict[str, str]) -> dict[str, Any]:
    return dict(http.get(OPENAPI, headers=operator).json)


def _validator(document: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    """`schema` read against the document's components (``#/components/...`` resolves)."""
    return Draft202012Validator(
        {**schema, "components": document["components"]}, format_checker=FormatChecker()
    )


def _query_value(raw: str, param: dict[str, Any]) -> Any:
    """The value a query string carries, read as its schema's type: a JSON number, and an
    integer written as one (``1000``, not ``1e3``).
    """
    kind = param["schema"].get("type")
    if raw == "" or kind not in ("integer", "number"):
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(value, bool) or (kind == "integer" and not isinstance(value, int)):
        return raw
    return value


def _allows(document: dict[str, Any], param: dict[str, Any], raw: str) -> bool:
    if raw == "":
        return bool(param.get("allowEmptyValue"))
    return _validator(document, param["schema"]).is_valid(_query_value(raw, param))


PROBES = [
    *("", "0", "1", "-1", "1.5", "1e3", "1e-05", "true", "null", "abc", "5831834333"),
    *("200", "201", "500", "501", "1000", "1001", str(10**9), str(10**9 + 1)),
    *("316224000", "316224000.5", "3.8e307", "nan"),
    *("0-0", "1-0", "1700000000000-0", "9" * 19 + "-9", "9" * 20 + "-0", "1-"),
    *("2025-01-31", "2025-02-30", "3882-05-27", "0001-01-01", "2025-1-1"),
    *("idle", "closed", "nonsense", "calculator", "c.n", "x" * 70, "csv", "jsonl", "changed"),
]


def _query_operations(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """GET operations with query parameters, except streams (they never end)."""
    found = []
    for path, methods in document["paths"].items():
        get = methods.get("get")
        if get is None or "text/event-stream" in get["responses"]["200"]["content"]:
            continue
        if any(p["in"] == "query" for p in get.get("parameters", [])):
            found.append((path, get))
    return found


def test_every_query_parameter_is_read_as_declared(
    http: FlaskClient, operator: dict[str, str], document: dict[str, Any]
) -> None:
    """Each probe of each parameter: allowed by the document if and only if not a 400."""
    cid = new_conversation(http, operator)
    bid = submit_batch(http, operator, [{"prompt": "hi"}])["batch"]["id"]
    operations = _query_operations(document)
    assert len(operations) >= 8
    disagreements = []
    for path, get in operations:
        url = path.replace("{cid}", cid).replace("{bid}", bid).replace("{other}", bid)
        for param in (p for p in get["parameters"] if p["in"] == "query"):
            for raw in PROBES:
                response = http.get(url, query_string={param["name"]: raw}, headers=operator)
                assert response.status_code < 500, (path, param["name"], raw)
                if (response.status_code != 400) != _allows(document, param, raw):
                    disagreements.append((path, param["name"], raw, response.status_code))
    assert disagreements == []


def test_every_operation_with_query_parameters_declares_400(document: dict[str, Any]) -> None:
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            if operation.get("parameters") and any(
                p["in"] == "query" for p in operation["parameters"]
            ):
                assert "400" in operation["responses"], (method, path)


def test_every_operation_with_a_json_body_declares_400(document: dict[str, Any]) -> None:
    """A body that is not JSON is a 400 (`json_body`): schemathesis found it undocumented on
    routes and notification links, whose views listed only 409 and 422."""
    with_body = [
        (method, path)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]
    assert ("post", "/api/v1/routes") in with_body and len(with_body) > 15
    for method, path in with_body:
        assert "400" in document["paths"][path][method]["responses"], (method, path)


def _body_allowed(document: dict[str, Any], operation: dict[str, Any], body: Any) -> bool:
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    return _validator(document, schema).is_valid(body)


# (method, path, body): the body is valid by the document (True) or not (False).
BODIES: list[tuple[str, str, Any, bool]] = [
    ("post", "/api/v1/conversations", {"max_tool_calls": False}, False),
    ("post", "/api/v1/conversations", {"compaction_token_budget": "5"}, False),
    ("post", "/api/v1/conversations", {"max_model_calls": 851.0, "timeout_s": 600}, True),
    ("post", "/api/v1/conversations", {"max_model_calls": 1.5}, False),
    ("post", "/api/v1/conversations", {"allow_all": 1}, False),
    ("post", "/api/v1/conversations", {"tools": {"!": [[]]}}, False),
    ("post", "/api/v1/conversations", {"tools": {"calculator": "ask"}}, True),
    ("post", "/api/v1/conversations", {"model": " \u3000"}, False),
    ("post", "/api/v1/conversations", {"model": "m\x00"}, True),
    ("post", "/api/v1/batches", {"items": [None, 5, "hi"]}, True),
    ("post", "/api/v1/batches", {"items": ["hi"], "config": {"max_concurrency": True}}, False),
    (
        "post",
        "/api/v1/batches",
        {"items": ["hi"], "config": {"conversation": {"max_tool_calls": False}}},
        False,
    ),
    ("put", "/api/v1/policy/rules", {"tool": "t", "policy": "deny", "batch_id": "b"}, True),
    (
        "put",
        "/api/v1/policy/rules",
        {"tool": "t", "policy": "deny", "batch_id": "b", "label": "l"},
        False,
    ),
    (
        "put",
        "/api/v1/policy/rules",
        {"tool": "t", "policy": "deny", "batch_id": None, "label": "l"},
        True,
    ),
    ("put", "/api/v1/policy/titles", {"tool": "send_email", "arguments": ["to", "to"]}, False),
    ("put", "/api/v1/policy/titles", {"tool": "send_email", "arguments": ["to", "cc"]}, True),
    ("put", "/api/v1/policy/titles", {"tool": "send_email", "arguments": ["a b"]}, False),
    ("post", "/api/v1/tokens", {"name": "\U000d6145\U0004b624"}, True),  # unassigned: fine
    ("post", "/api/v1/tokens", {"name": "a\u0083"}, False),
    ("post", "/api/v1/tokens", {"name": "a\u202e"}, False),
    ("post", "/api/v1/tokens", {"name": " \t"}, False),
    ("post", "/api/v1/tokens", {"name": "ci", "expires_in_s": True}, False),
    ("post", "/api/v1/tokens", {"name": "ci", "expires_in_s": 60.0}, True),
    ("post", "/api/v1/notifications/bulk-resolve", {"resolution": {}, "expected_count": 0}, False),
    (
        "post",
        "/api/v1/notifications/bulk-resolve",
        {"resolution": {"kind": "allow"}, "expected_count": 0},
        True,
    ),
    (
        "post",
        "/api/v1/notifications/bulk-resolve",
        {"resolution": {"kind": "allow", "arguments": {}}, "expected_count": 0},
        False,
    ),
    (
        "post",
        "/api/v1/notifications/bulk-resolve",
        {"resolution": {"kind": "deny", "reason": " "}, "expected_count": 0},
        False,
    ),
    (
        "post",
        "/api/v1/notifications/bulk-resolve",
        {"resolution": {"kind": "deny", "reason": "no"}, "expected_count": 10_001},
        False,
    ),
    (
        "post",
        "/api/v1/webhooks/endpoints",
        {"url": "https://h.test/x", "events": ["turn.failed"]},
        True,
    ),
    (
        "post",
        "/api/v1/webhooks/endpoints",
        {"url": "ftp://h.test/x", "events": ["turn.failed"]},
        False,
    ),
    (
        "post",
        "/api/v1/webhooks/endpoints",
        {"url": "https://h.test/ x", "events": ["turn.failed"]},
        False,
    ),
    ("post", "/api/v1/webhooks/endpoints", {"url": "https://h.test/", "events": []}, False),
    ("post", "/api/v1/triggers", {"name": "t", "agent": "a", "template": "x", "x": 1}, False),
    ("post", "/api/v1/triggers", {"name": "t t", "agent": "a", "template": "x"}, False),
    ("post", "/api/v1/notifications/c.n/resolve", {"content": {}, "kind": "submit"}, True),
    ("post", "/api/v1/notifications/c.n/resolve", {"content": {}}, False),
    ("post", "/api/v1/notifications/c.n/resolve", {"kind": "deny", "reason": "\u2003"}, False),
]


@pytest.mark.parametrize(("method", "path", "body", "allowed"), BODIES)
def test_a_body_is_refused_if_and_only_if_the_document_refuses_it(
    http: FlaskClient,
    operator: dict[str, str],
    document: dict[str, Any],
    method: str,
    path: str,
    body: Any,
    allowed: bool,
) -> None:
    operation = document["paths"][path.replace("/c.n/", "/{nid}/")][method]
    assert _body_allowed(document, operation, body) == allowed
    response = http.open(path, method=method.upper(), json=body, headers=operator)
    assert response.status_code < 500
    assert (response.status_code not in REFUSED) == allowed, response.text


_MEDIA = {"kind": "media", "mime_type": "image/png", "data": "aGk="}
PROMPTS: list[tuple[Any, bool]] = [
    ({"text": "hello"}, True),
    ({"text": " \x00\u3000"}, False),
    ({"text": "/compact now"}, True),
    ({"text": "/" + "a" * 64}, True),
    ({"text": " /" + "a" * 65 + " args"}, True),  # not a known command: text
    ({"text": "/etc/hosts is which file?"}, True),
    ({"text": "hi", "tool_selection": "none", "timeout_s": 1.5}, True),
    ({"text": "hi", "response_schema": {"type": "object"}}, True),
    ({"text": "hi", "timeout_s": 0}, False),
    ({"text": "hi", "timeout_s": 1e9}, False),
    ({"text": "hi", "tool_selection": "sometimes"}, False),
    ({"text": "hi", "response_schema": []}, False),
    ({}, False),
    ({"text": "a", "content": {"parts": [{"kind": "text", "text": "b"}]}}, False),
    ({"text": None, "content": {"parts": [{"kind": "text", "text": "b"}]}}, True),
    ({"content": {"parts": []}}, False),
    ({"content": {}}, False),
    ({"content": {"parts": [{"kind": "text", "text": " "}]}}, False),
    ({"content": {"parts": [{"text": "no kind"}]}}, False),
    ({"content": {"parts": [{"kind": "text", "text": " "}, _MEDIA]}}, True),
    ({"content": {"parts": [{**_MEDIA, "data": "aGl="}]}}, False),  # stray bits
    ({"content": {"parts": [{**_MEDIA, "data": ""}]}}, False),
    ({"content": {"parts": [{**_MEDIA, "mime_type": "application/x-msdownload"}]}}, False),
    ({"content": {"parts": [{"kind": "slash_command", "name": "compact"}]}}, True),
    ({"content": {"parts": [{"kind": "slash_command", "name": "café"}]}}, False),
    ({"content": {"parts": [{"kind": "slash_command", "name": "frobnicate"}]}}, False),
    ({"content": {"parts": [{"kind": "slash_command", "name": " compact"}]}}, False),
]


@pytest.mark.parametrize(("body", "allowed"), PROMPTS)
def test_a_prompt_is_refused_if_and_only_if_the_document_refuses_it(
    http: FlaskClient,
    operator: dict[str, str],
    document: dict[str, Any],
    body: Any,
    allowed: bool,
) -> None:
    cid = new_conversation(http, operator)
    operation = document["paths"]["/api/v1/conversations/{cid}/prompts"]["post"]
    assert _body_allowed(document, operation, body) == allowed
    response = http.post(f"/api/v1/conversations/{cid}/prompts", json=body, headers=operator)
    assert (response.status_code not in REFUSED) == allowed, response.text


def test_the_prompt_limits_come_from_settings(make_app: AppFactory) -> None:
    app = make_app(
        max_prompt_text_bytes=1000,
        max_prompt_media_bytes=2000,
        allowed_media_types=frozenset({"image/png"}),
    )
    document = build_document(app)
    schemas = document["components"]["schemas"]
    assert schemas["PromptText"]["properties"]["text"]["maxLength"] == 1000
    body_text = schemas["PromptBody"]["properties"]["text"]["description"]
    assert "Not only whitespace" in body_text and "1,000 bytes" in body_text
    media = schemas["PromptMedia"]["properties"]
    assert media["mime_type"]["enum"] == ["image/png"]
    assert "2,000 bytes" in media["data"]["description"]
    form = document["paths"]["/api/v1/conversations/{cid}/prompts"]["post"]["requestBody"]
    assert form["content"]["multipart/form-data"]["encoding"]["media"]["contentType"] == (
        "image/png"
    )


def test_a_malformed_notification_id_is_a_404(
    http: FlaskClient, operator: dict[str, str], document: dict[str, Any]
) -> None:
    """A path the document's pattern does not allow matches no route: 404, not 422."""
    params = document["paths"]["/api/v1/notifications/{nid}"]["get"]["parameters"]
    nid = next(p["schema"] for p in params if p["name"] == "nid")
    validator = _validator(document, nid)
    assert not validator.is_valid("0") and validator.is_valid("c1.n1")
    assert http.get("/api/v1/notifications/0", headers=operator).status_code == 404
    resolve = http.post(
        "/api/v1/notifications/0/resolve", json={"kind": "submit", "content": {}}, headers=operator
    )
    assert resolve.status_code == 404
    assert http.get("/api/v1/notifications/c1.n1", headers=operator).status_code == 404


def test_a_found_notification_still_answers(
    http: FlaskClient, operator: dict[str, str], svc: Services
) -> None:
    note = Notification(
        id="c1.n1", conversation_id="c1", turn_id="t1", title="t", allowed=[], created_at=1.0
    )
    svc.redis.hset(svc.keys.notification(note.id), mapping={"doc": note.model_dump_json()})
    assert http.get("/api/v1/notifications/c1.n1", headers=operator).json["id"] == "c1.n1"


def test_options_lists_the_methods_the_document_declares(
    http: FlaskClient, operator: dict[str, str], document: dict[str, Any]
) -> None:
    for path, methods in document["paths"].items():
        url = path.replace("{nid}", "c1.n1").replace("{tool}", "calculator")
        url = url.replace("{", "").replace("}", "")  # other arguments: any id
        allow = http.open(url, method="OPTIONS", headers=operator).headers["Allow"]
        declared = {m.upper() for m in methods}
        assert set(allow.replace(" ", "").split(",")) - {"HEAD", "OPTIONS"} == declared, path


@pytest.mark.parametrize(
    ("header", "query", "after"),
    [("", None, None), ("", "0", "0-0"), ("1-2", "3-4", "1-2"), (None, "5-6", "5-6")],
)
def test_an_empty_last_event_id_header_is_none(
    app: Flask,
    document: dict[str, Any],
    header: str | None,
    query: str | None,
    after: str | None,
) -> None:
    """As the document says: EventSource resets its id to empty; the query then decides."""
    params = document["paths"]["/api/v1/conversations/{cid}/events"]["get"]["parameters"]
    declared = next(p["schema"] for p in params if p["in"] == "header")
    assert header is None or _validator(document, declared).is_valid(header)
    headers = {} if header is None else {"Last-Event-ID": header}
    args = {} if query is None else {"last_event_id": query}
    with app.test_request_context(headers=headers, query_string=args):
        assert EventsQuery.read().after == after
