"""Signed single-use approval links against a real worker: a GET shows, never resolves; the
approver it names uses it once; another approver, a second use, an expired or a forged link
are refused."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

from flask import Flask
from flask.testing import FlaskClient

from shared.models.users import Role
from tests import pending_records
from tests.web.conftest import (
    bearer,
    body_validator,
    documented,
    form_csrf,
    new_conversation,
    services_of,
    sign_in,
    wait_for,
)
from webui.services import Services

PASSWORD = "a-long-passphrase"


def _parked(http: FlaskClient, operator: dict[str, str]) -> str:
    cid = new_conversation(http, operator, tools={"calculator": "ask"})
    text = 'call calculator {"expression": "3*3"}'
    sent = http.post(f"/api/v1/conversations/{cid}/prompts", json={"text": text}, headers=operator)
    assert sent.status_code == 202, sent.text
    url = f"/api/v1/notifications?conversation_id={cid}"
    return str(wait_for(lambda: http.get(url, headers=operator).json["items"], "a call")[0]["id"])


def _signed_in(app: Flask, name: str) -> FlaskClient:
    browser = app.test_client()
    assert sign_in(browser, name, PASSWORD).status_code == 302
    return browser


def test_a_link_works_once_for_its_approver(stack_app: Flask) -> None:
    http, svc = stack_app.test_client(), services_of(stack_app)
    operator = bearer(svc.tokens.create("links-op", Role.OPERATOR))
    for name in ("lia", "max"):
        svc.users.add(name, PASSWORD, role=Role.APPROVER)
    nid = _parked(http, operator)
    made = http.post(
        f"/api/v1/notifications/{nid}/links",
        json={"approver": "lia", "expires_in_s": 600},
        headers=operator,
    )
    assert made.status_code == 201, made.text
    path = urlsplit(made.json["url"]).path
    assert path.startswith("/approve/")

    anonymous = http.get(path)
    assert anonymous.status_code == 302 and "/sign-in" in anonymous.headers["Location"]
    other = _signed_in(stack_app, "max")
    assert other.get(path).status_code == 403
    lia = _signed_in(stack_app, "lia")
    for _ in range(2):  # scanners and unfurlers fetch links: opening changes nothing
        page = lia.get(path)
        assert page.status_code == 200 and "3*3" in page.text and 'id="link-decision"' in page.text
    assert svc.notifications.get(nid).status.value == "pending"
    stolen = other.post(
        path, data={"decision": "allow", "csrf_token": form_csrf(other.get("/").text)}
    )
    assert stolen.status_code == 403
    assert svc.notifications.get(nid).status.value == "pending"

    used = lia.post(path, data={"decision": "allow", "csrf_token": form_csrf(page.text)})
    assert used.status_code == 302, used.text
    note = svc.notifications.get(nid)
    assert (note.status.value, note.resolved_by) == ("resolved", "lia")
    again = lia.post(
        path, data={"decision": "deny", "reason": "x", "csrf_token": form_csrf(page.text)}
    )
    assert again.status_code == 409 and "already used" in again.text
    assert lia.get(path).status_code == 409


def test_expired_and_forged_links_are_refused(stack_app: Flask) -> None:
    http, svc = stack_app.test_client(), services_of(stack_app)
    operator = bearer(svc.tokens.create("links-op2", Role.OPERATOR))
    svc.users.add("nia", PASSWORD, role=Role.APPROVER)
    nid = _parked(http, operator)
    token = svc.links.token(nid, "nia", expires_in_s=1)
    nia = _signed_in(stack_app, "nia")
    body, _, signature = token.partition(".")
    forged = (
        f"{body}.{signature[:-2]}AA"
        if not signature.endswith("AA")
        else f"{body}.{signature[:-2]}BB"
    )
    assert nia.get(f"/approve/{forged}").status_code == 404
    time.sleep(1.1)
    expired = nia.get(f"/approve/{token}")
    assert expired.status_code == 410 and "expired" in expired.text
    assert svc.notifications.get(nid).status.value == "pending"
    refused = http.post(
        f"/api/v1/notifications/{nid}/links",
        json={"approver": "nia", "expires_in_s": 0},
        headers=operator,
    )
    assert refused.status_code == 422 and "expires_in_s" in refused.text


def test_the_document_and_the_server_agree_on_a_link_body(
    http: FlaskClient, svc: Services, operator: dict[str, str]
) -> None:
    """Schemathesis's findings: `expires_in_s` 147433.0 (an integer, to JSON Schema) was a 422,
    and a body that is not JSON an undocumented 400."""
    nid = pending_records.put(svc.redis, svc.keys, 1, tool="send_email", batch=None).id
    path = f"/api/v1/notifications/{nid}/links"
    takes = body_validator(http, operator, "post", "/api/v1/notifications/{nid}/links")
    for body in ({"approver": "lia", "expires_in_s": 147433.0}, {"approver": "lia"}):
        assert takes.is_valid(body)
        made = http.post(path, json=body, headers=operator)
        assert made.status_code == 201, made.text
    for body in (
        {"approver": "lia", "expires_in_s": 1.5},
        {"approver": "lia", "expires_in_s": True},
        {"approver": "lia", "expires_in_s": "600"},
    ):
        assert not takes.is_valid(body)
        refused = http.post(path, json=body, headers=operator)
        assert refused.status_code == 422 and "expires_in_s" in refused.text, body
    assert 400 in documented(http, operator, "post", "/api/v1/notifications/{nid}/links")
    not_json = http.post(path, data="approver=lia", headers=operator)
    assert not_json.status_code == 400 and not_json.json["error"]["code"] == "expected_json"
