"""Search in request arguments (`q`) and claims (claim, release, "claimed by me"): the API and
the pages, the roles and scopes that may claim, and the audit of both."""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient

from shared.models.users import Role
from tests.pending_records import put
from tests.web.conftest import OPERATOR, bearer, form_csrf
from webui.approvals.inbox import MINE_SCAN
from webui.services import Services

EMAILS = [
    {"to": "ana@example.com", "subject": "Refund 120 EUR"},
    {"to": "bo@example.com", "subject": "Invoice 7"},
    {"to": "cy@example.com", "subject": "refund 15 EUR"},
]


def _park(svc: Services) -> list[str]:
    """Three send_email calls and one calculator call, pending, oldest first."""
    ids = [
        put(svc.redis, svc.keys, n, tool="send_email", batch="b1", args=args, created_at=n).id
        for n, args in enumerate(EMAILS, 1)
    ]
    calc = put(svc.redis, svc.keys, 9, tool="calculator", batch=None, args={"expression": "1+1"})
    return [*ids, calc.id]


def _listed(http: FlaskClient, headers: dict[str, str], **params: Any) -> tuple[list[str], int]:
    found = http.get("/api/v1/notifications", query_string=params, headers=headers)
    assert found.status_code == 200, found.text
    return [item["id"] for item in found.json["items"]], found.json["pending_count"]


def test_q_finds_requests_by_tool_and_arguments_any_case(
    http: FlaskClient, svc: Services, viewer: dict[str, str]
) -> None:
    ana, bo, cy, calc = _park(svc)
    assert _listed(http, viewer, q="REFUND") == ([ana, cy], 2)
    assert _listed(http, viewer, q="bo@example") == ([bo], 1)
    assert _listed(http, viewer, q="calcul") == ([calc], 1)  # the tool's name
    assert _listed(http, viewer, q="1+1", tool="send_email") == ([], 0)
    assert _listed(http, viewer, q="eur", limit=1, offset=1) == ([cy], 2)
    assert _listed(http, viewer, q="  ") == ([ana, bo, cy, calc], 4)  # blank: unset
    too_long = http.get("/api/v1/notifications", query_string={"q": "x" * 201}, headers=viewer)
    assert too_long.status_code == 400 and "q" in too_long.json["error"]["message"]


def test_q_reads_at_most_the_oldest_pending_it_may(
    http: FlaskClient, svc: Services, viewer: dict[str, str]
) -> None:
    args = {"to": "late@example.com"}
    for n in range(MINE_SCAN):
        put(svc.redis, svc.keys, n, tool="noise", batch=None, args={"x": "y"}, created_at=n)
    put(svc.redis, svc.keys, MINE_SCAN + 1, tool="send_email", batch=None, args=args)
    assert _listed(http, viewer, q="late@") == ([], 0)  # past the bound: not read
    found, count = _listed(http, viewer, q="late@", tool="send_email")  # a facet narrows it
    assert count == 1 and len(found) == 1


def test_claims_are_for_who_may_resolve_and_anyone_may_still_resolve(
    http: FlaskClient, svc: Services, tokens: dict[Role, str]
) -> None:
    ana, bo, _, calc = _park(svc)
    for role in (Role.VIEWER, Role.SUBMITTER):
        refused = http.post(f"/api/v1/notifications/{ana}/claim", headers=bearer(tokens[role]))
        assert refused.status_code == 403
    scoped = bearer(svc.tokens.issue("calc-only", Role.APPROVER, scopes=["tool:calculator"]).token)
    outside = http.post(f"/api/v1/notifications/{ana}/claim", headers=scoped)
    assert outside.status_code == 403 and "outside the scopes" in outside.json["error"]["message"]
    assert svc.notifications.get(ana).claimed_by is None  # nothing written
    assert http.post(f"/api/v1/notifications/{calc}/claim", headers=scoped).status_code == 200

    uma = bearer(svc.tokens.issue("uma", Role.APPROVER).token)
    vic = bearer(svc.tokens.issue("vic", Role.APPROVER).token)
    claimed = http.post(f"/api/v1/notifications/{ana}/claim", headers=uma)
    assert claimed.status_code == 200 and claimed.json["claimed_by"] == "uma"
    assert http.post(f"/api/v1/notifications/{bo}/claim", headers=uma).status_code == 200
    taken = http.post(f"/api/v1/notifications/{ana}/claim", headers=vic)
    assert taken.status_code == 409 and "claimed by uma" in taken.json["error"]["message"]
    assert http.post(f"/api/v1/notifications/{ana}/release", headers=vic).status_code == 409
    assert _listed(http, uma, view="claimed") == ([ana, bo], 2)
    assert _listed(http, vic, view="claimed") == ([], 0)
    assert _listed(http, scoped, view="claimed") == ([calc], 1)
    assert _listed(http, uma, view="claimed", q="invoice") == ([bo], 1)

    resolved = http.post(
        f"/api/v1/notifications/{ana}/resolve", json={"kind": "deny", "reason": "no"}, headers=vic
    )
    assert resolved.status_code == 200  # a claim holds nobody back
    late = http.post(f"/api/v1/notifications/{ana}/claim", headers=uma)
    assert late.status_code == 409 and "waits no more" in late.json["error"]["message"]
    assert http.post(f"/api/v1/notifications/{bo}/release", headers=uma).status_code == 200
    free = http.post(f"/api/v1/notifications/{bo}/release", headers=uma)
    assert free.status_code == 409 and "not claimed" in free.json["error"]["message"]
    assert http.post(f"/api/v1/notifications/{bo}/claim", headers=vic).status_code == 200
    operator = bearer(tokens[Role.OPERATOR])
    assert http.post(f"/api/v1/notifications/{bo}/release", headers=operator).status_code == 200

    audit = http.get("/api/v1/audit", headers=operator).json["items"]
    latest = [(e["claim"] or e["kind"], e["actor"], e["claimed_by"]) for e in audit]
    assert latest[:3] == [
        ("release", "operator token", "vic"),
        ("claim", "vic", "vic"),
        ("release", "uma", "uma"),
    ]
    [decision] = [e for e in audit if e["notification_id"] == ana and e["kind"] == "deny"]
    assert decision["actor"] == "vic" and decision["claimed_by"] == "uma"
    claims = http.get("/api/v1/audit?decision=claim", headers=operator).json["items"]
    assert {(e["notification_id"], e["actor"]) for e in claims} == {
        (ana, "uma"),
        (bo, "uma"),
        (bo, "vic"),
        (calc, "calc-only"),
    }
    assert all(e["status"] == "pending" and e["scope"] for e in claims)


def test_the_pages_claim_release_search_and_keep_bulk_to_facets(
    signed_in: FlaskClient, svc: Services
) -> None:
    ana, bo, _, _ = _park(svc)
    page = signed_in.get(f"/approvals/{ana}?q=refund").text
    assert 'id="claim"' in page and "Nobody has claimed it." in page
    assert signed_in.post(f"/approvals/{ana}/claim", data={"q": "refund"}).status_code == 403
    claimed = signed_in.post(
        f"/approvals/{ana}/claim",
        data={"q": "refund", "csrf_token": form_csrf(page)},
        follow_redirects=True,
    )
    assert claimed.request.path == f"/approvals/{ana}" and claimed.request.args["q"] == "refund"
    assert (
        "Claimed send_email to ana@example.com: &#34;Refund 120 EUR&#34; (batch b1)."
        in claimed.text
    )
    assert (
        f"Claimed by <strong>{OPERATOR[0]}</strong>" in claimed.text
        and 'id="release"' in claimed.text
    )
    inbox = signed_in.get("/approvals?q=refund").text
    assert inbox.count('<tr data-nid="') == 2 and f"claimed by {OPERATOR[0]}" in inbox
    assert 'id="bulk-form"' not in inbox and 'id="bulk-unavailable"' in inbox
    assert 'value="refund"' in inbox
    mine = signed_in.get("/approvals?view=claimed").text
    assert f'data-nid="{ana}"' in mine and f'data-nid="{bo}"' not in mine
    everyone = signed_in.get("/approvals").text
    assert 'id="bulk-form"' in everyone
    bulk = signed_in.get("/approvals/bulk?decision=allow&tool=send_email&q=refund").text
    assert 'data-count="3"' in bulk and 'name="q"' not in bulk  # facets only
    released = signed_in.post(
        f"/approvals/{ana}/release", data={"csrf_token": form_csrf(page)}, follow_redirects=True
    )
    assert (
        "Released send_email to ana@example.com" in released.text and 'id="claim"' in released.text
    )
    audit = signed_in.get("/audit?decision=claim").text
    assert audit.count('data-entry-id="') == 1
