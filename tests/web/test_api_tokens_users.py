"""/api/v1/tokens and /api/v1/users: operators list, create and revoke tokens, disable users."""

from __future__ import annotations

import logging

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.models.users import Role
from tests.web.conftest import OPERATOR, bearer, page_csrf, sign_in
from webui.services import Services

ENDPOINTS = [
    ("GET", "/api/v1/tokens"),
    ("POST", "/api/v1/tokens"),
    ("DELETE", "/api/v1/tokens/0123456789ab"),
    ("GET", "/api/v1/users"),
    ("POST", "/api/v1/users/ada/disable"),
    ("POST", "/api/v1/users/ada/enable"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_only_operators_manage_tokens_and_users(
    http: FlaskClient, svc: Services, tokens: dict[Role, str], method: str, path: str
) -> None:
    svc.users.add(*OPERATOR)
    for role in (Role.VIEWER, Role.SUBMITTER):
        response = http.open(path, method=method, json={"name": "x"}, headers=bearer(tokens[role]))
        assert response.status_code == 403, (role, response.text)
        assert response.json["error"]["code"] == "forbidden"
    assert http.open(path, method=method, json={"name": "x"}).status_code == 401
    assert svc.users.info(OPERATOR[0]).disabled is False  # nothing happened


def test_create_list_use_and_revoke_a_token(
    http: FlaskClient, svc: Services, operator: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    created = http.post(
        "/api/v1/tokens",
        json={"name": "deploy bot", "role": "submitter", "expires_in_s": 86_400},
        headers=operator,
    )
    assert created.status_code == 201, created.text
    body = created.json
    plain, token_id = body["token"], body["id"]
    assert body["role"] == "submitter" and body["expired"] is False
    assert body["expires_at"] == pytest.approx(body["created_at"] + 86_400)
    assert created.headers["Cache-Control"] == "no-store"
    assert http.post("/api/v1/conversations", json={}, headers=bearer(plain)).status_code == 201
    listing = http.get("/api/v1/tokens", headers=operator)
    assert plain not in listing.text
    (mine,) = [item for item in listing.json["items"] if item["id"] == token_id]
    assert mine["name"] == "deploy bot" and mine["last_used_at"] is not None
    with caplog.at_level(logging.INFO, logger="shared.store.users"):
        revoked = http.delete(f"/api/v1/tokens/{token_id}", headers=operator)
    assert revoked.status_code == 200 and revoked.json["id"] == token_id
    assert f"revoked by token {Role.OPERATOR.value} token" in caplog.text
    assert plain not in caplog.text
    refused = http.get("/api/v1/conversations", headers=bearer(plain))
    assert refused.status_code == 401
    again = http.delete(f"/api/v1/tokens/{token_id}", headers=operator)
    assert again.status_code == 404
    assert again.json["error"] == {
        "code": "not_found",
        "message": f"API token {token_id} does not exist",
    }
    assert http.delete("/api/v1/tokens/not-an-id", headers=operator).status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "expires_in_s": 0}, "expires_in_s"),
        ({"name": "x", "expires_in_s": "soon"}, "expires_in_s"),
        ({"name": "x", "role": "root"}, "role"),
        ({"name": ""}, "name"),
        ({"name": "x", "secret": "y"}, "secret"),
        ({}, "name"),
    ],
)
def test_bad_token_requests_name_the_field(
    http: FlaskClient, svc: Services, operator: dict[str, str], body: dict[str, object], field: str
) -> None:
    before = len(svc.tokens.tokens())
    response = http.post("/api/v1/tokens", json=body, headers=operator)
    assert response.status_code == 422, response.text
    assert response.json["error"]["message"].startswith(field)
    assert len(svc.tokens.tokens()) == before


def test_a_session_manages_tokens_with_its_csrf_token(signed_in: FlaskClient) -> None:
    refused = signed_in.post("/api/v1/tokens", json={"name": "x"})
    assert refused.status_code == 403 and refused.json["error"]["code"] == "csrf_failed"
    created = signed_in.post(
        "/api/v1/tokens", json={"name": "x"}, headers={"X-CSRF-Token": page_csrf(signed_in)}
    )
    assert created.status_code == 201 and created.json["role"] == "viewer"


def test_disable_ends_sessions_and_enable_lets_back_in(
    app: Flask,
    svc: Services,
    operator: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    svc.users.add(*OPERATOR)
    browser = app.test_client()
    assert sign_in(browser).status_code == 302
    listed = app.test_client().get("/api/v1/users", headers=operator).json["items"]
    assert listed == [
        {
            "name": OPERATOR[0],
            "role": "operator",
            "scopes": [],
            "created_at": pytest.approx(svc.users.info(OPERATOR[0]).created_at),
            "disabled": False,
            "sessions": 1,
        }
    ]
    http = app.test_client()
    with caplog.at_level(logging.INFO, logger="shared.store.users"):
        disabled = http.post(f"/api/v1/users/{OPERATOR[0]}/disable", headers=operator)
    assert disabled.status_code == 200
    assert (disabled.json["disabled"], disabled.json["sessions"]) == (True, 0)
    assert f"user {OPERATOR[0]} disabled by token operator token" in caplog.text
    assert browser.get("/usage").status_code == 302
    assert sign_in(app.test_client()).status_code == 403
    enabled = http.post(f"/api/v1/users/{OPERATOR[0]}/enable", headers=operator)
    assert enabled.status_code == 200 and enabled.json["disabled"] is False
    assert sign_in(app.test_client()).status_code == 302


@pytest.mark.parametrize("action", ["disable", "enable"])
def test_unknown_user_is_404(http: FlaskClient, operator: dict[str, str], action: str) -> None:
    response = http.post(f"/api/v1/users/nobody/{action}", headers=operator)
    assert response.status_code == 404
    assert response.json["error"]["message"] == "user nobody does not exist"


def test_openapi_declares_them_operator_only(http: FlaskClient, viewer: dict[str, str]) -> None:
    paths = http.get("/api/v1/openapi.json", headers=viewer).json["paths"]
    declared = {
        ("/api/v1/tokens", "get"),
        ("/api/v1/tokens", "post"),
        ("/api/v1/tokens/{token_id}", "delete"),
        ("/api/v1/users", "get"),
        ("/api/v1/users/{name}/disable", "post"),
        ("/api/v1/users/{name}/enable", "post"),
    }
    for path, method in declared:
        assert paths[path][method]["x-required-role"] == "operator", (path, method)
    assert "201" in paths["/api/v1/tokens"]["post"]["responses"]
    assert "404" in paths["/api/v1/tokens/{token_id}"]["delete"]["responses"]
