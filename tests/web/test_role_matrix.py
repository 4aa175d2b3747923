"""Every route x every role: a caller below a route's role gets 403 before the view runs, and
the approver's writes are exactly the resolving ones (no policy, agents, schedules, webhooks,
triggers, MCP servers, tokens or users)."""

from __future__ import annotations

import re

from flask import Flask
from flask.testing import FlaskClient

from shared.models.users import Role
from tests.web.conftest import bearer
from webui.auth import required_role
from webui.services import Services

# Every state-changing route an approver may call: resolving, one, a selection or in bulk;
# claiming and releasing a request.
APPROVER_WRITES = {
    ("POST", "api.notifications.resolve"),
    ("POST", "api.notifications.claim"),
    ("POST", "api.notifications.release"),
    ("POST", "pages.approvals.claim"),
    ("POST", "pages.approvals.release"),
    ("POST", "api.notifications.bulk_resolve"),
    ("POST", "pages.approvals.resolve"),
    ("POST", "pages.approvals.resolve_selected"),
    ("POST", "pages.bulk.confirm"),
    ("POST", "pages.approval_links.decide"),
}
# Writes open to every role: signing out, and the MCP endpoint (each tool checks the role).
EVERY_ROLE_WRITES = {("POST", "pages.session.sign_out"), ("POST", "mcp")}
_WRITES = {"POST", "PUT", "PATCH", "DELETE"}


def _value(match: re.Match[str]) -> str:
    """A value the argument's converter matches: an `any(...)` converter's first choice."""
    if match[1] == "nid":
        return "c1.n1"
    if match[1] == "any":
        return match[2].split(",")[0].strip()
    return "x1"


def _concrete(rule: str) -> str:
    return re.sub(r"<(?:(\w+)(?:\(([^)]*)\))?:)?[^>]+>", _value, rule)


def _routes(app: Flask) -> list[tuple[str, str, str, Role]]:
    """(method, endpoint, concrete path, required role) of every authenticated route."""
    found = []
    for rule in app.url_map.iter_rules():
        role = required_role(app.view_functions[rule.endpoint])
        if role is None or rule.endpoint == "static":
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            found.append((method, rule.endpoint, _concrete(rule.rule), role))
    return found


def test_every_route_refuses_each_role_below_it(
    app: Flask, http: FlaskClient, svc: Services
) -> None:
    headers = {role: bearer(svc.tokens.create(f"{role.value} m", role)) for role in Role}
    refused = 0
    for method, endpoint, path, needed in _routes(app):
        for role in Role:
            if role.allows(needed):
                continue
            response = http.open(path, method=method, headers=headers[role])
            assert response.status_code == 403, (method, endpoint, role)
            expected = f"this needs the {needed.value} role; the caller has {role.value}"
            body = response.json["error"]["message"] if response.is_json else response.text
            assert expected in body, (method, endpoint, role, body[:200])
            refused += 1
    assert refused > 150


def test_the_approver_writes_only_resolutions(app: Flask) -> None:
    writes = {
        (method, endpoint)
        for method, endpoint, _, needed in _routes(app)
        if method in _WRITES and Role.APPROVER.allows(needed)
    }
    assert writes == APPROVER_WRITES | EVERY_ROLE_WRITES
    reads = [(m, e) for m, e, _, needed in _routes(app) if m == "GET" and needed is Role.VIEWER]
    assert all(Role.APPROVER.allows(Role.VIEWER) for _ in reads) and len(reads) > 30
    # the operator's reads (tokens, users, webhook deliveries...) stay the operator's
    operator_reads = {
        e for m, e, _, needed in _routes(app) if m == "GET" and needed is Role.OPERATOR
    }
    assert "api.tokens.list_tokens" in operator_reads and "api.users.list_users" in operator_reads


def test_roles_include_what_they_should() -> None:
    assert Role.APPROVER.allows(Role.VIEWER) and Role.APPROVER.allows(Role.APPROVER)
    assert not Role.APPROVER.allows(Role.SUBMITTER) and not Role.APPROVER.allows(Role.OPERATOR)
    assert not Role.SUBMITTER.allows(Role.APPROVER) and not Role.VIEWER.allows(Role.APPROVER)
    assert all(Role.OPERATOR.allows(role) for role in Role)
