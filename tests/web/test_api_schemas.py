"""A response schema is checked when a conversation or a batch is created: 422 naming the limit."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from shared.schema import MAX_PATTERN_CHARS, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH
from tests.web.conftest import new_conversation

EVIL = {
    "type": "object",
    "properties": {"a": {"type": "string", "pattern": "(a+)+$"}},
    "required": ["a"],
}


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels - 1):
        schema = {"not": schema}
    return schema


BAD = [
    pytest.param({"description": "x" * MAX_SCHEMA_BYTES}, "MAX_SCHEMA_BYTES", id="size"),
    pytest.param(_nested(MAX_SCHEMA_DEPTH + 1), "MAX_SCHEMA_DEPTH", id="depth"),
    pytest.param(
        {"properties": {"a": {"pattern": "a" * (MAX_PATTERN_CHARS + 1)}}},
        "the pattern at $.properties.a.pattern is 1,001 characters",
        id="pattern-length",
    ),
    pytest.param(
        {"properties": {f"p{i}": {"pattern": f"^{i}$"} for i in range(101)}},
        "MAX_SCHEMA_PATTERNS",
        id="pattern-count",
    ),
    pytest.param(
        {"properties": {"a": {"pattern": "(a)\\1"}}},
        "the pattern at $.properties.a.pattern is not supported",
        id="backreference",
    ),
    pytest.param({"$ref": "https://example.com/s.json"}, "not inside the schema", id="remote-ref"),
]


def test_the_evil_pattern_is_accepted(http: FlaskClient, submitter: dict[str, str]) -> None:
    cid = new_conversation(http, submitter, response_schema=EVIL)
    assert cid


@pytest.mark.parametrize(("schema", "expected"), BAD)
def test_a_schema_out_of_bounds_is_422_on_create(
    http: FlaskClient, submitter: dict[str, str], schema: dict[str, Any], expected: str
) -> None:
    response = http.post(
        "/api/v1/conversations", json={"response_schema": schema}, headers=submitter
    )
    assert response.status_code == 422, response.text
    error = response.json["error"]
    assert error["code"] == "invalid_input"
    assert error["message"].startswith("response_schema")
    assert expected in error["message"]
    assert http.get("/api/v1/conversations", headers=submitter).json["items"] == []


@pytest.mark.parametrize(("schema", "expected"), BAD[:3])
def test_a_batch_schema_out_of_bounds_is_422_on_create(
    http: FlaskClient, submitter: dict[str, str], schema: dict[str, Any], expected: str
) -> None:
    body = {"items": [{"prompt": "x"}], "config": {"conversation": {"response_schema": schema}}}
    response = http.post("/api/v1/batches", json=body, headers=submitter)
    assert response.status_code == 422, response.text
    assert response.json["error"]["code"] == "invalid_input"
    assert expected in response.json["error"]["message"]
    assert http.get("/api/v1/batches", headers=submitter).json["items"] == []
