"""What schemathesis (`make fuzz`, every check) found, each a case where the OpenAPI document and
the server now agree: a body the document refuses is a 4xx, one it allows is not refused."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.web.test_api_contract import _validator

AS_REFUSED = [
    ("/api/v1/conversations", {"model_settings": {"temperature": False}}),
    ("/api/v1/conversations", {"model_settings": {"seed": False}}),
    ("/api/v1/conversations", {"model_settings": {"parallel_tool_calls": 0}}),
    ("/api/v1/conversations", {"agent_version": 2}),
    ("/api/v1/conversations", {"agent": "triage", "tools": {}}),  # the agent decides its tools
    ("/api/v1/schedules", {"agent": "a", "name": "n", "prompt": "p"}),
    ("/api/v1/schedules", {"agent": "a", "name": "n", "prompt": "p", "cron": None}),
    ("/api/v1/mcp/servers", {"name": "s"}),
    ("/api/v1/mcp/servers", {"name": "s", "command": "x", "headers": {"h": "v"}}),
    (
        "/api/v1/mcp/servers",
        {"name": "s", "command": "x", "url": "http://h.test/", "headers": {"h": "v"}},
    ),
    ("/api/v1/tokens", {"name": "t", "role": "approver", "scopes": [""]}),
    ("/api/v1/tokens", {"name": "t", "role": "viewer", "scopes": ["tool:send_email"]}),
    ("/api/v1/batches", {"items": [{"prompt": "a", "pattern": 1}]}),
]
AS_ALLOWED = [
    ("/api/v1/conversations", {"model_settings": {"seed": 5.0}}),
    ("/api/v1/tokens", {"name": "t", "role": "approver", "scopes": ["tool:send_email"]}),
    ("/api/v1/batches", {"items": [None, {"prompt": "a", "timeout_s": 30}]}),
]


def _schema(document: dict[str, Any], path: str) -> dict[str, Any]:
    body = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    return dict(body["schema"])


@pytest.fixture
def document(http: FlaskClient, operator: dict[str, str]) -> dict[str, Any]:
    return dict(http.get("/api/v1/openapi.json", headers=operator).json)


@pytest.mark.parametrize(("path", "body"), AS_REFUSED)
def test_a_body_the_document_refuses_is_refused(
    http: FlaskClient, operator: dict[str, str], document: dict[str, Any], path: str, body: Any
) -> None:
    assert not _validator(document, _schema(document, path)).is_valid(body)
    answer = http.post(path, json=body, headers=operator)
    assert answer.status_code in (400, 422), answer.text


@pytest.mark.parametrize(("path", "body"), AS_ALLOWED)
def test_a_body_the_document_allows_is_accepted(
    http: FlaskClient, operator: dict[str, str], document: dict[str, Any], path: str, body: Any
) -> None:
    assert _validator(document, _schema(document, path)).is_valid(body)
    answer = http.post(path, json=body, headers=operator)
    assert answer.status_code == 201, answer.text


def test_names_no_record_can_have_are_a_documented_404(
    http: FlaskClient, operator: dict[str, str], document: dict[str, Any]
) -> None:
    paths = document["paths"]
    assert "404" in paths["/api/v1/triggers/{name}"]["post"]["responses"]
    assert "404" in paths["/api/v1/prices/{provider}/{model}"]["put"]["responses"]
    assert http.post("/api/v1/triggers/a%2Cb", json={}, headers=operator).status_code == 404
