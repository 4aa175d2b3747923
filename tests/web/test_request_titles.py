"""Requests titled by their arguments: the operator's choice per tool (API, page), and titles
built from model-written arguments escaped on every page and message that shows them."""

from __future__ import annotations

from flask.testing import FlaskClient

from shared.models.config import ToolPolicy
from shared.models.users import Role
from shared.store.policy import ToolInfo
from tests.pending_records import put
from tests.web.conftest import form_csrf
from webui.services import Services

HOSTILE = {
    "to": "<img src=x onerror=alert(1)>",
    "subject": '"><script>alert(2)</script>',
    "body": "long " * 40,
}


def test_operators_choose_the_title_arguments_per_tool(
    http: FlaskClient, svc: Services, tokens: dict[Role, str]
) -> None:
    svc.policies.publish_catalog([ToolInfo(name="send_email", default_policy=ToolPolicy.ASK)])
    choice = {"tool": "send_email", "arguments": ["subject", "to"]}
    for role in (Role.VIEWER, Role.SUBMITTER, Role.APPROVER):
        refused = http.put("/api/v1/policy/titles", json=choice, headers=_bearer(tokens[role]))
        assert refused.status_code == 403
    operator = _bearer(tokens[Role.OPERATOR])
    for bad in (["a", "b", "c"], [], ["no spaces"]):
        body = {"tool": "send_email", "arguments": bad}
        assert http.put("/api/v1/policy/titles", json=body, headers=operator).status_code == 422
    saved = http.put("/api/v1/policy/titles", json=choice, headers=operator)
    assert saved.status_code == 200 and saved.json == choice
    [row] = http.get("/api/v1/policy", headers=operator).json["tools"]
    assert row["title_arguments"] == ["subject", "to"]
    args = {"to": "ana@example.com", "subject": "Refund 120 EUR"}
    note = put(svc.redis, svc.keys, 1, tool="send_email", batch="b1", args=args)
    assert svc.policies.title_arguments() == {"send_email": ("subject", "to")}
    cleared = http.delete("/api/v1/policy/titles/send_email", headers=operator)
    assert cleared.status_code == 200 and cleared.json == choice
    assert http.delete("/api/v1/policy/titles/send_email", headers=operator).status_code == 404
    [row] = http.get("/api/v1/policy", headers=operator).json["tools"]
    assert row["title_arguments"] is None
    assert note.id  # parked before the change: titles are read when shown


def test_the_policy_page_sets_title_arguments_with_its_csrf_token(
    signed_in: FlaskClient, svc: Services
) -> None:
    svc.policies.publish_catalog([ToolInfo(name="send_email", default_policy=ToolPolicy.ASK)])
    page = signed_in.get("/policy").text
    assert 'aria-label="Arguments that title send_email requests' in page
    form = {"tool": "send_email", "arguments": "to, subject"}
    assert signed_in.post("/policy/titles", data=form).status_code == 403  # no CSRF token
    saved = signed_in.post(
        "/policy/titles", data={**form, "csrf_token": form_csrf(page)}, follow_redirects=True
    )
    assert "send_email requests are titled by to, subject." in saved.text
    assert svc.policies.title_arguments() == {"send_email": ("to", "subject")}
    args = {"to": "ana@example.com", "subject": "Refund 120 EUR", "body": "Hello"}
    note = put(svc.redis, svc.keys, 2, tool="send_email", batch="b2", args=args)
    inbox = signed_in.get("/approvals").text
    assert "send_email to ana@example.com: &#34;Refund 120 EUR&#34;" in inbox
    detail = signed_in.get(f"/approvals/{note.id}").text
    assert "<title>send_email to ana@example.com: &#34;Refund 120 EUR&#34; · Signoff</title>" in (
        detail
    )
    cleared = signed_in.post(
        "/policy/titles",
        data={"tool": "send_email", "arguments": "", "csrf_token": form_csrf(page)},
        follow_redirects=True,
    )
    assert "titled by the first short string arguments" in cleared.text
    assert svc.policies.title_arguments() == {}


def test_titles_from_arguments_are_escaped_in_pages_and_messages(
    signed_in: FlaskClient, svc: Services
) -> None:
    batch = "batch0042xyz"
    note = put(svc.redis, svc.keys, 3, tool="send_email", batch=batch, args=HOSTILE, created_at=1.0)
    pages = {
        "inbox": signed_in.get("/approvals").text,
        "request": signed_in.get(f"/approvals/{note.id}").text,
        "bulk": signed_in.get("/approvals/bulk?decision=allow&tool=send_email").text,
    }
    for name, html in pages.items():
        assert "<img src=x" not in html and "<script>alert(2)" not in html, name
        assert "send_email to &#34;&lt;img src=x onerror=alert(1)&gt;&#34;" in html, name
    assert "&#34;\\&#34;&gt;&lt;script&gt;alert(2)&lt;/script&gt;&#34;" in pages["request"]
    denied = signed_in.post(
        f"/approvals/{note.id}/resolve",
        data={"decision": "deny", "reason": "no", "csrf_token": form_csrf(pages["request"])},
        follow_redirects=True,
    )
    flashed = denied.text.split('class="flash flash-info"', 1)[1].split("</p>", 1)[0]
    assert flashed.startswith(' role="status">Denied send_email to &#34;&lt;img src=x')
    assert flashed.endswith("(batch batch004).")
    assert "<img src=x" not in denied.text


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
