"""The approvals inbox (API and pages) against a real worker that parks on `ask` tools."""

from __future__ import annotations

import time
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.models.users import Role
from tests.web.conftest import OPERATOR, bearer, form_csrf, new_conversation, sign_in
from webui.services import Services

XSS = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def roles(stack_app: Flask) -> dict[Role, dict[str, str]]:
    svc: Services = stack_app.extensions["signoff"]
    return {role: bearer(svc.tokens.create(f"{role.value} token", role)) for role in Role}


@pytest.fixture
def http(stack_app: Flask) -> FlaskClient:
    return stack_app.test_client()


def _wait(probe: Any, what: str, timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _parked(
    http: FlaskClient, headers: dict[str, str], expression: str
) -> tuple[str, str, dict[str, Any]]:
    """A conversation whose calculator call waits for an operator: (cid, turn id, notification)."""
    cid = new_conversation(http, headers, tools={"calculator": "ask"})
    sent = http.post(
        f"/api/v1/conversations/{cid}/prompts",
        json={"text": f'call calculator {{"expression": "{expression}"}}'},
        headers=headers,
    )
    assert sent.status_code == 202
    listing = _wait(
        lambda: http.get(f"/api/v1/notifications?conversation_id={cid}", headers=headers).json[
            "items"
        ],
        "the notification",
    )
    return cid, sent.json["turn_id"], listing[0]


def _turn(http: FlaskClient, headers: dict[str, str], cid: str, turn_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        turn = http.get(f"/api/v1/conversations/{cid}/turns/{turn_id}", headers=headers).json
        return turn if turn["status"] in ("completed", "failed", "cancelled") else None

    return dict(_wait(done, "the end of the turn"))


def test_resolving_through_the_api(http: FlaskClient, roles: dict[Role, dict[str, str]]) -> None:
    cid, turn_id, note = _parked(http, roles[Role.SUBMITTER], "6*7")
    assert note["tool_call"]["name"] == "calculator"
    assert note["tool_call"]["args"] == {"expression": "6*7"}
    assert {"allow", "deny"} <= set(note["allowed"]) and note["status"] == "pending"
    detail = http.get(f"/api/v1/conversations/{cid}", headers=roles[Role.VIEWER]).json
    assert detail["status"] == "waiting_for_user"
    url = f"/api/v1/notifications/{note['id']}/resolve"
    allow = {"kind": "allow", "arguments": {"expression": "6*8"}}
    for role in (Role.VIEWER, Role.SUBMITTER):
        refused = http.post(url, json=allow, headers=roles[role])
        assert refused.status_code == 403
        assert "approver role" in refused.json["error"]["message"]
    invalid = http.post(url, json={"kind": "deny", "reason": " "}, headers=roles[Role.OPERATOR])
    assert invalid.status_code == 422
    resolved = http.post(url, json=allow, headers=roles[Role.OPERATOR])
    assert resolved.status_code == 200, resolved.text
    assert resolved.json["status"] == "resolved"
    assert resolved.json["resolved_by"] == "operator token"
    again = http.post(url, json={"kind": "deny", "reason": "late"}, headers=roles[Role.OPERATOR])
    assert again.status_code == 409
    assert "already resolved (allow) by operator token" in again.json["error"]["message"]
    turn = _turn(http, roles[Role.VIEWER], cid, turn_id)
    assert turn["status"] == "completed" and "48" in turn["response"]["text"]
    gone = http.get(f"/api/v1/notifications?conversation_id={cid}", headers=roles[Role.VIEWER])
    assert gone.json == {"items": [], "pending_count": 0, "offset": 0, "limit": 50}
    missing = http.get("/api/v1/notifications/nope.x1", headers=roles[Role.VIEWER])
    assert missing.status_code == 404


def test_inbox_pages_escape_and_deny(
    http: FlaskClient, stack_app: Flask, roles: dict[Role, dict[str, str]]
) -> None:
    svc: Services = stack_app.extensions["signoff"]
    if not svc.users.exists(OPERATOR[0]):
        svc.users.add(*OPERATOR)
    assert sign_in(http).status_code == 302
    cid, turn_id, note = _parked(http, roles[Role.SUBMITTER], XSS)
    inbox = http.get(f"/approvals?conversation_id={cid}").text
    assert f"/approvals/{note['id']}" in inbox and 'id="pending-count">1<' in inbox
    page = http.get(f"/approvals/{note['id']}").text
    assert XSS not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'id="allow-form"' in page and 'id="deny-form"' in page
    resolve = f"/approvals/{note['id']}/resolve"
    assert http.post(resolve, data={"decision": "deny", "reason": "no"}).status_code == 403
    denied = http.post(
        resolve,
        data={"decision": "deny", "reason": "not on my watch", "csrf_token": form_csrf(page)},
    )
    assert denied.status_code == 302
    turn = _turn(http, roles[Role.VIEWER], cid, turn_id)
    assert turn["status"] == "completed" and "denied" in turn["response"]["text"]
    settled = http.get(f"/approvals/{note['id']}").text
    assert "not on my watch" in settled and f"by {OPERATOR[0]}" in settled
    assert 'id="deny-form"' not in settled
    late = http.post(
        resolve,
        data={"decision": "allow", "csrf_token": form_csrf(page)},
        follow_redirects=True,
    )
    assert "already resolved (deny)" in late.text
