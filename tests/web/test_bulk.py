"""Bulk approvals (count first, then confirm with it) and the audit log, with a real worker."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.models.notifications import Allow, Resolution
from shared.models.users import Role
from tests.web.conftest import (
    OPERATOR,
    batch_when,
    form_csrf,
    services_of,
    sign_in,
    submit_batch,
    wait_for,
)
from webui.services import Services

BULK = "/api/v1/notifications/bulk-resolve"
ASK = {"conversation": {"tools": {"calculator": "ask"}}}


@pytest.fixture
def svc(stack_app: Flask) -> Services:
    return services_of(stack_app)


@pytest.fixture
def http(stack_app: Flask) -> FlaskClient:
    return stack_app.test_client()


@pytest.fixture
def operator_page(http: FlaskClient, svc: Services) -> FlaskClient:
    if not svc.users.exists(OPERATOR[0]):
        svc.users.add(*OPERATOR)
    assert sign_in(http).status_code == 302
    return http


def _parked_batch(
    http: FlaskClient, roles: dict[Role, dict[str, str]], expressions: list[str]
) -> tuple[str, list[str]]:
    """A batch whose every item waits on a calculator call: (batch id, notification ids)."""
    items = [
        {"id": f"e{i}", "prompt": f'call calculator {{"expression": "{e}"}}'}
        for i, e in enumerate(expressions)
    ]
    bid = submit_batch(http, roles[Role.SUBMITTER], items, config=ASK)["batch"]["id"]
    batch_when(http, roles[Role.VIEWER], bid, lambda d: d["pending_approvals"] == len(expressions))
    listing = http.get(f"/api/v1/notifications?batch={bid}", headers=roles[Role.VIEWER]).json
    by_conversation = {note["conversation_id"]: note["id"] for note in listing["items"]}
    store = services_of(http.application).batches
    return bid, [by_conversation[store.conversation_id(bid, f"e{i}")] for i in range(len(items))]


def _confirm_form(html: str) -> dict[str, str]:
    """The confirmation form's hidden fields, without its CSRF token."""
    form = html[html.index('id="bulk-confirm"') :]
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form))
    assert fields.pop("csrf_token"), "the page has no confirmation form"
    return fields


def _answers(http: FlaskClient, headers: dict[str, str], bid: str) -> list[str]:
    """The answer of each item, in input order, once the batch is done."""
    batch_when(http, headers, bid, lambda d: d["status"] == "done")
    lines = http.get(f"/api/v1/batches/{bid}/results", headers=headers).text.splitlines()
    return [str(json.loads(line)["text"]) for line in lines]


def test_bulk_allow_shows_the_count_and_asks_again_when_it_changed(
    operator_page: FlaskClient, roles: dict[Role, dict[str, str]], svc: Services
) -> None:
    http = operator_page
    bid, ids = _parked_batch(http, roles, ["1+1", "2+2", "3+3"])
    inbox = http.get(f"/approvals?batch={bid}").text
    assert 'id="bulk-form"' in inbox and f'name="batch_id" value="{bid}"' in inbox
    viewer = roles[Role.VIEWER]
    assert 'id="bulk-form"' not in http.get(f"/approvals?batch={bid}", headers=viewer).text
    assert (
        http.get(f"/approvals/bulk?batch={bid}&decision=allow", headers=viewer).status_code == 403
    )
    assert http.get(f"/approvals/bulk?batch={bid}&decision=submit").status_code == 400
    preview = http.get(f"/approvals/bulk?batch_id={bid}&decision=allow").text
    assert 'data-count="3"' in preview
    assert "This will <strong>allow</strong> <strong>3</strong> notifications" in preview
    fields = _confirm_form(preview)
    assert fields["expected_count"] == "3" and fields["batch_id"] == bid
    assert http.post("/approvals/bulk", data=fields).status_code == 403  # no CSRF token
    fields["csrf_token"] = form_csrf(preview)
    svc.notifications.resolve(ids[0], {"kind": "deny", "reason": "not this one"}, actor="bob")
    changed = http.post("/approvals/bulk", data=fields)
    assert changed.status_code == 409
    assert "The count changed from 3 to 2 since it was shown" in changed.text
    assert svc.notifications.count_pending(batch_id=bid) == 2  # nothing touched
    again = _confirm_form(changed.text)
    assert again["expected_count"] == "2" and again["created_before"] == fields["created_before"]
    done = http.post(
        "/approvals/bulk", data={**again, "csrf_token": form_csrf(preview)}, follow_redirects=True
    )
    assert done.status_code == 200 and f"Allowed 2 of 2: batch {bid}." in done.text
    assert done.request.path == f"/batches/{bid}"  # nothing of it left to decide: its page
    assert svc.notifications.count_pending(batch_id=bid) == 0
    answers = _answers(http, roles[Role.VIEWER], bid)
    assert "calculator was denied" in answers[0] and "not this one" in answers[0]
    assert '"result": 4' in answers[1] and '"result": 6' in answers[2]


def test_bulk_deny_needs_a_reason_and_counts_conflicts(
    operator_page: FlaskClient,
    roles: dict[Role, dict[str, str]],
    svc: Services,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = operator_page
    bid, ids = _parked_batch(http, roles, ["5*5", "6*6"])
    preview = http.get(f"/approvals/bulk?batch={bid}&decision=deny").text
    assert 'id="reason"' in preview and 'data-count="2"' in preview
    fields = {**_confirm_form(preview), "csrf_token": form_csrf(preview)}
    blank = http.post("/approvals/bulk", data={**fields, "reason": "  "})
    assert blank.status_code == 422 and "a denial needs a reason" in blank.text
    assert svc.notifications.count_pending(batch_id=bid) == 2

    original = svc.notifications.resolve
    raced: list[str] = []

    def someone_else_first(
        nid: str, resolution: Resolution | dict[str, Any], *, actor: str, **checked: Any
    ) -> Any:
        if not raced:  # another operator allows the second one just before ours lands
            raced.append(ids[1])
            original(ids[1], Allow(), actor="bob")
        return original(nid, resolution, actor=actor, **checked)

    monkeypatch.setattr(svc.notifications, "resolve", someone_else_first)
    done = http.post("/approvals/bulk", data={**fields, "reason": "no maths today"})
    assert done.status_code == 302
    flashed = http.get(done.headers["Location"]).text
    assert f"Denied 1 of 2; 1 already resolved by someone else: batch {bid}." in flashed
    first, second = svc.notifications.get(ids[0]), svc.notifications.get(ids[1])
    assert first.resolved_by == OPERATOR[0] and first.resolution is not None
    assert first.resolution.kind == "deny" and second.resolved_by == "bob"
    answers = _answers(http, roles[Role.VIEWER], bid)
    assert "no maths today" in answers[0] and '"result": 36' in answers[1]


def test_bulk_leaves_notifications_that_arrived_after_the_count(
    operator_page: FlaskClient, roles: dict[Role, dict[str, str]], svc: Services
) -> None:
    http = operator_page
    bid, [first] = _parked_batch(http, roles, ["7+7"])
    preview = http.get(f"/approvals/bulk?batch={bid}&decision=allow").text
    fields = {**_confirm_form(preview), "csrf_token": form_csrf(preview)}
    later = {"id": "later", "prompt": 'call calculator {"expression": "8+8"}'}
    submit_batch(http, roles[Role.SUBMITTER], [later], batch_id=bid)
    wait_for(lambda: svc.notifications.count_pending(batch_id=bid) == 2, "the later call")
    done = http.post("/approvals/bulk", data=fields, follow_redirects=True)
    assert f"Allowed 1 of 1: batch {bid}." in done.text
    [left] = svc.notifications.pending(batch_id=bid)
    assert left.id != first and left.tool_call is not None
    assert left.tool_call.args == {"expression": "8+8"}


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"resolution": {"kind": "allow"}}, 422),  # expected_count missing
        ({"resolution": {"kind": "deny", "reason": " "}, "expected_count": 0}, 422),
        ({"resolution": {"kind": "submit", "content": 1}, "expected_count": 0}, 422),
        ({"resolution": {"kind": "allow", "arguments": {}}, "expected_count": 0}, 422),
        ({"resolution": {"kind": "allow"}, "expected_count": -1}, 422),
        ({"resolution": {"kind": "allow"}, "expected_count": 0, "filter": {"min_age_s": -1}}, 422),
        ({"resolution": {"kind": "allow"}, "expected_count": 0, "filter": {"owner": "x"}}, 422),
    ],
)
def test_bulk_resolve_validates(
    http: FlaskClient, roles: dict[Role, dict[str, str]], body: dict[str, Any], status: int
) -> None:
    response = http.post(BULK, json=body, headers=roles[Role.OPERATOR])
    assert response.status_code == status, response.text
    assert response.json["error"]["code"] == "invalid_input"


def test_bulk_resolve_needs_the_operator_role(
    http: FlaskClient, roles: dict[Role, dict[str, str]]
) -> None:
    body = {"resolution": {"kind": "allow"}, "expected_count": 0}
    assert http.post(BULK, json=body).status_code == 401
    for role in (Role.VIEWER, Role.SUBMITTER):
        refused = http.post(BULK, json=body, headers=roles[role])
        assert refused.status_code == 403 and "approver role" in refused.text
    malformed = http.post(
        BULK, data=b"{", headers={**roles[Role.OPERATOR], "Content-Type": "application/json"}
    )
    assert malformed.status_code == 400


def test_bulk_resolve_api_409_then_pinned_retry(
    http: FlaskClient, roles: dict[Role, dict[str, str]], svc: Services
) -> None:
    bid, ids = _parked_batch(http, roles, ["9+1", "9+2"])
    counted = http.get(f"/api/v1/notifications?batch_id={bid}", headers=roles[Role.VIEWER]).json
    assert counted["pending_count"] == 2
    old = http.get(
        f"/api/v1/notifications?batch_id={bid}&min_age_s=3600", headers=roles[Role.VIEWER]
    )
    assert old.json["pending_count"] == 0
    bad_age = http.get("/api/v1/notifications?min_age_s=soon", headers=roles[Role.VIEWER])
    assert bad_age.status_code == 400
    body: dict[str, Any] = {
        "filter": {"batch_id": bid},
        "resolution": {"kind": "deny", "reason": "bulk says no"},
        "expected_count": 3,
    }
    conflict = http.post(BULK, json=body, headers=roles[Role.OPERATOR])
    assert conflict.status_code == 409 and conflict.json["error"]["code"] == "count_changed"
    [details] = conflict.json["error"]["details"]
    assert details["current_count"] == 2
    assert svc.notifications.count_pending(batch_id=bid) == 2
    pinned = {**body, "expected_count": 2}
    pinned["filter"] = {"batch_id": bid, "tool": "", "created_before": details["created_before"]}
    done = http.post(BULK, json=pinned, headers=roles[Role.OPERATOR])
    assert done.status_code == 200, done.text
    assert {k: done.json[k] for k in ("matched", "resolved", "conflicts", "not_applicable")} == {
        "matched": 2,
        "resolved": 2,
        "conflicts": 0,
        "not_applicable": 0,
    }
    assert all(svc.notifications.get(nid).resolved_by == "operator token" for nid in ids)


def test_audit_lists_resolutions_newest_first(
    operator_page: FlaskClient, roles: dict[Role, dict[str, str]], stack_app: Flask
) -> None:
    http = operator_page
    _, [edited, denied] = _parked_batch(http, roles, ["6*7", "1/0"])
    allow = {"kind": "allow", "arguments": {"expression": "6*8"}}
    url = "/api/v1/notifications/{}/resolve"
    assert (
        http.post(url.format(edited), json=allow, headers=roles[Role.OPERATOR]).status_code == 200
    )
    deny = {"kind": "deny", "reason": "<b>division</b> by zero"}
    assert http.post(url.format(denied), json=deny, headers=roles[Role.OPERATOR]).status_code == 200
    newest = http.get("/api/v1/audit?limit=1", headers=roles[Role.VIEWER]).json
    [entry] = newest["items"]
    assert entry["notification_id"] == denied and entry["kind"] == "deny"
    assert entry["reason"] == "<b>division</b> by zero" and entry["actor"] == "operator token"
    assert entry["arguments_before"] == {"expression": "1/0"} and entry["arguments_after"] is None
    older = http.get(
        f"/api/v1/audit?limit=1&before={newest['next_before']}", headers=roles[Role.VIEWER]
    ).json
    [previous] = older["items"]
    assert previous["notification_id"] == edited and previous["kind"] == "allow"
    assert previous["arguments_before"] == {"expression": "6*7"}
    assert previous["arguments_after"] == {"expression": "6*8"}
    assert http.get("/api/v1/audit?before=yesterday", headers=roles[Role.VIEWER]).status_code == 400
    assert stack_app.test_client().get("/api/v1/audit").status_code == 401
    page = http.get("/audit").text
    rows = re.findall(r'<tr data-entry-id="[^"]+">(.*?)</tr>', page, re.DOTALL)
    denied_row = next(row for row in rows if f"/approvals/{denied}" in row)
    assert "&lt;b&gt;division&lt;/b&gt; by zero" in denied_row and "<b>division" not in page
    assert "operator token" in denied_row and "<code>calculator</code>" in denied_row
    edited_row = next(row for row in rows if f"/approvals/{edited}" in row)
    assert re.search(r'diff-del">- +&#34;expression&#34;: &#34;6\*7&#34;', edited_row)
    assert re.search(r'diff-add">\+ +&#34;expression&#34;: &#34;6\*8&#34;', edited_row)
