"""/api/v1/conversations: create, list, read, abort, close; roles and error shapes."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.models.events import TurnStatus
from shared.models.steps import UsageMetadata
from tests.web.conftest import new_conversation
from webui.services import Services


def _concrete(rule: str) -> str:
    """The rule with a value its converter matches for each argument."""
    return re.sub(r"<(?:(\w+):)?[^>]+>", lambda m: "c1.n1" if m[1] == "nid" else "x1", rule)


def test_every_api_route_needs_credentials(app: Flask, http: FlaskClient) -> None:
    checked = 0
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/v1"):
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            response = http.open(_concrete(rule.rule), method=method)
            assert response.status_code == 401, (method, rule.rule)
            if rule.endpoint.endswith((".fire_trigger", ".interactions")) and method == "POST":
                # an inbound trigger is authenticated by the sender's signature alone
                assert response.json["error"]["code"] == "bad_signature"
                assert response.headers["WWW-Authenticate"].startswith("Signature")
            else:
                assert response.json["error"]["code"] == "unauthorized"
                assert response.headers["WWW-Authenticate"].startswith("Bearer")
            checked += 1
    assert checked >= 14


def test_invalid_token_is_401(http: FlaskClient) -> None:
    response = http.get("/api/v1/conversations", headers={"Authorization": "Bearer so_nope"})
    assert response.status_code == 401
    assert "unknown or revoked" in response.json["error"]["message"]
    basic = http.get("/api/v1/conversations", headers={"Authorization": "Basic YTpi"})
    assert basic.status_code == 401


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/conversations",
        "/api/v1/conversations/c1/prompts",
        "/api/v1/conversations/c1/abort",
        "/api/v1/conversations/c1/close",
    ],
)
def test_viewer_cannot_post(http: FlaskClient, viewer: dict[str, str], path: str) -> None:
    response = http.post(path, json={"text": "hi"}, headers=viewer)
    assert response.status_code == 403
    assert response.json["error"] == {
        "code": "forbidden",
        "message": "this needs the submitter role; the caller has viewer",
    }


def test_revoked_token_is_refused(http: FlaskClient, svc: Services) -> None:
    token = svc.tokens.create("ci", "viewer")
    headers = {"Authorization": f"Bearer {token}"}
    assert http.get("/api/v1/conversations", headers=headers).status_code == 200
    (listed,) = svc.tokens.tokens()
    svc.tokens.revoke(listed.token_id)
    assert http.get("/api/v1/conversations", headers=headers).status_code == 401


def test_create_then_read(http: FlaskClient, operator: dict[str, str]) -> None:
    response = http.post(
        "/api/v1/conversations",
        json={
            "system_prompt": "Be brief.",
            "tools": {"calculator": "ask"},
            "max_history_size": 50,
            "metadata": {"team": "ops"},
            "conversation_id": "conv-1",
            "double_text_policy": "reject",
        },
        headers=operator,
    )
    assert response.status_code == 201, response.text
    body = response.json
    assert body["id"] == "conv-1"
    assert response.headers["Location"].endswith("/api/v1/conversations/conv-1")
    assert body["status"] == "idle" and body["queued"] == 0 and body["active_turn"] is None
    assert body["config"]["system_prompt"] == "Be brief."
    assert body["config"]["tools"] == {"calculator": "ask"}
    assert body["config"]["double_text_policy"] == "reject"
    assert body["metadata"] == {"team": "ops"}
    assert body["usage"] == {"total": UsageMetadata().model_dump(), "last_turn": None}
    again = http.get("/api/v1/conversations/conv-1", headers=operator)
    assert again.status_code == 200
    assert again.json == body


def test_create_conflict_on_duplicate_id(http: FlaskClient, operator: dict[str, str]) -> None:
    new_conversation(http, operator, conversation_id="dup")
    response = http.post("/api/v1/conversations", json={"conversation_id": "dup"}, headers=operator)
    assert response.status_code == 409
    assert response.json["error"]["code"] == "conflict"


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"max_model_calls": 0}, "max_model_calls"),
        ({"tools": {"calculator": "sometimes"}}, "tools.calculator"),
        ({"unknown_option": 1}, "unknown_option"),
        ({"conversation_id": "has space"}, "conversation_id"),
        ({"response_schema": {"type": "nonsense"}}, "response_schema"),
        ({"model": "   "}, "model"),
    ],
)
def test_create_rejects_bad_options(
    http: FlaskClient, submitter: dict[str, str], body: dict[str, object], where: str
) -> None:
    response = http.post("/api/v1/conversations", json=body, headers=submitter)
    assert response.status_code == 422, response.text
    assert where in response.json["error"]["message"]


def test_malformed_json_is_400(http: FlaskClient, submitter: dict[str, str]) -> None:
    response = http.post(
        "/api/v1/conversations",
        data="{not json",
        headers={**submitter, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json["error"]["code"] == "malformed_json"
    not_json = http.post("/api/v1/conversations", data="x=1", headers=submitter)
    assert not_json.status_code == 400
    assert not_json.json["error"]["code"] == "expected_json"


def test_list_paginates_and_filters(
    http: FlaskClient, submitter: dict[str, str], viewer: dict[str, str]
) -> None:
    ids = [new_conversation(http, submitter) for _ in range(5)]
    http.post(f"/api/v1/conversations/{ids[1]}/close", headers=submitter)
    first = http.get("/api/v1/conversations?limit=2", headers=viewer).json
    assert [c["id"] for c in first["items"]] == ids[::-1][:2]
    assert first["total"] == 5 and first["next_offset"] == 2
    last = http.get("/api/v1/conversations?limit=2&offset=4", headers=viewer).json
    assert [c["id"] for c in last["items"]] == [ids[0]] and last["next_offset"] is None
    closed = http.get("/api/v1/conversations?status=closed", headers=viewer).json
    assert [c["id"] for c in closed["items"]] == [ids[1]]
    assert closed["total"] is None and closed["next_offset"] is None
    idle = http.get("/api/v1/conversations?status=idle&limit=3", headers=viewer).json
    assert [c["id"] for c in idle["items"]] == [ids[4], ids[3], ids[2]]
    assert idle["next_offset"] == 3


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=201", "offset=-1", "limit=ten", "status=sleeping"]
)
def test_list_rejects_bad_parameters(http: FlaskClient, viewer: dict[str, str], query: str) -> None:
    response = http.get(f"/api/v1/conversations?{query}", headers=viewer)
    assert response.status_code == 400
    assert response.json["error"]["code"] == "bad_parameter"


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("GET", ""),
        ("POST", "/abort"),
        ("POST", "/close"),
        ("POST", "/prompts"),
        ("GET", "/history"),
        ("GET", "/events"),
        ("GET", "/turns/t1"),
    ],
)
def test_unknown_conversation_is_404(
    http: FlaskClient, operator: dict[str, str], method: str, suffix: str
) -> None:
    response = http.open(
        f"/api/v1/conversations/missing{suffix}",
        method=method,
        json={"text": "hi"},
        headers=operator,
    )
    assert response.status_code == 404
    assert response.json["error"]["code"] == "not_found"
    assert "missing" in response.json["error"]["message"]


def test_ids_that_cannot_exist_are_404(http: FlaskClient, viewer: dict[str, str]) -> None:
    response = http.get("/api/v1/conversations/%7Bbad%7D", headers=viewer)
    assert response.status_code == 404
    assert response.json["error"]["code"] == "not_found"


def test_abort_cancels_queued_turns(http: FlaskClient, submitter: dict[str, str]) -> None:
    cid = new_conversation(http, submitter)
    turn_id = http.post(
        f"/api/v1/conversations/{cid}/prompts", json={"text": "hello"}, headers=submitter
    ).json["turn_id"]
    response = http.post(f"/api/v1/conversations/{cid}/abort", headers=submitter)
    assert response.status_code == 202
    assert response.json["queued"] == 0 and response.json["closed"] is False
    turn = http.get(f"/api/v1/conversations/{cid}/turns/{turn_id}", headers=submitter).json
    assert turn["status"] == TurnStatus.CANCELLED.value and turn["error"] == "aborted"


def test_close_then_prompt_is_409(http: FlaskClient, submitter: dict[str, str]) -> None:
    cid = new_conversation(http, submitter)
    closed = http.post(f"/api/v1/conversations/{cid}/close", headers=submitter)
    assert closed.status_code == 202
    assert closed.json["closed"] is True and closed.json["status"] == "closed"
    response = http.post(
        f"/api/v1/conversations/{cid}/prompts", json={"text": "hi"}, headers=submitter
    )
    assert response.status_code == 409
    assert response.json["error"]["code"] == "closed"
    assert http.get(f"/api/v1/conversations/{cid}/history", headers=submitter).status_code == 200


def test_busy_conversation_with_reject_policy_is_409(
    http: FlaskClient, submitter: dict[str, str]
) -> None:
    cid = new_conversation(http, submitter, double_text_policy="reject")
    first = http.post(f"/api/v1/conversations/{cid}/prompts", json={"text": "a"}, headers=submitter)
    assert first.status_code == 202
    second = http.post(
        f"/api/v1/conversations/{cid}/prompts", json={"text": "b"}, headers=submitter
    )
    assert second.status_code == 409
    assert second.json["error"]["code"] == "conflict"
    detail = http.get(f"/api/v1/conversations/{cid}", headers=submitter).json
    assert detail["queued"] == 1
