"""Approvers and their scopes against a real worker: the inbox's "mine" view, and a 403 with
nothing written outside the scopes (API, page, bulk, MCP, CLI); the audit records the scope."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from shared.models.users import Role
from tests.stack import ROOT
from tests.web.conftest import bearer, new_conversation, services_of, sign_in, wait_for

SIGNOFF = str(Path(sys.executable).with_name("signoff"))
MCP = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
PASSWORD = "a-long-passphrase"


def _parked(http: FlaskClient, operator: dict[str, str], label: str) -> dict[str, Any]:
    """A pending calculator call in a conversation labelled `label`."""
    cid = new_conversation(http, operator, tools={"calculator": "ask"}, labels=[label])
    sent = http.post(
        f"/api/v1/conversations/{cid}/prompts",
        json={"text": 'call calculator {"expression": "6*7"}'},
        headers=operator,
    )
    assert sent.status_code == 202, sent.text
    url = f"/api/v1/notifications?conversation_id={cid}"
    found = wait_for(lambda: http.get(url, headers=operator).json["items"], "the notification")
    return dict(found[0])


def _audited(http: FlaskClient, headers: dict[str, str], nid: str) -> list[dict[str, Any]]:
    items = http.get("/api/v1/audit?limit=200", headers=headers).json["items"]
    return [entry for entry in items if entry["notification_id"] == nid]


def test_a_scoped_approver_resolves_only_within_its_scope(
    stack_app: Flask, roles: dict[Role, dict[str, str]]
) -> None:
    http, svc = stack_app.test_client(), services_of(stack_app)
    operator = roles[Role.OPERATOR]
    finance, ops = _parked(http, operator, "finance"), _parked(http, operator, "ops")
    issued = svc.tokens.issue("fin-approver", Role.APPROVER, scopes=["label:finance"])
    approver = bearer(issued.token)

    mine = http.get("/api/v1/notifications?view=mine&limit=200", headers=approver).json
    mine_ids = {item["id"] for item in mine["items"]}
    assert finance["id"] in mine_ids and ops["id"] not in mine_ids
    assert mine["pending_count"] == len(mine_ids)
    everyone = {i["id"] for i in http.get("/api/v1/notifications", headers=approver).json["items"]}
    assert ops["id"] in everyone  # it reads what a viewer reads
    viewer_mine = http.get("/api/v1/notifications?view=mine", headers=roles[Role.VIEWER]).json
    assert viewer_mine["items"] == [] and viewer_mine["pending_count"] == 0

    allow = {"kind": "allow"}
    refused = http.post(f"/api/v1/notifications/{ops['id']}/resolve", json=allow, headers=approver)
    assert refused.status_code == 403
    message = refused.json["error"]["message"]
    assert "outside the scopes of 'fin-approver' (label:finance)" in message
    page = http.post(
        f"/approvals/{ops['id']}/resolve", data={"decision": "allow"}, headers=approver
    )
    assert page.status_code == 403
    selected = http.post(
        "/approvals/selected", data={"nid": [ops["id"]], "decision": "allow"}, headers=approver
    )
    assert selected.status_code == 403
    bulk = http.post(
        "/api/v1/notifications/bulk-resolve",
        json={"filter": {"conversation_id": ops["conversation_id"]}, "expected_count": 1}
        | {"resolution": allow},
        headers=approver,
    )
    assert bulk.status_code == 403 and "nothing was resolved" in bulk.json["error"]["message"]
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "resolve_approval",
            "arguments": {"approval_id": ops["id"], "decision": "allow"},
        },
    }
    answer = http.post("/mcp", json=call, headers={**MCP, **approver}).json["result"]
    assert answer["isError"] is True and "outside the scopes" in answer["content"][0]["text"]
    assert svc.notifications.get(ops["id"]).status.value == "pending"  # nothing written
    assert _audited(http, operator, ops["id"]) == []

    done = http.post(f"/api/v1/notifications/{finance['id']}/resolve", json=allow, headers=approver)
    assert done.status_code == 200, done.text
    assert done.json["resolved_by"] == "fin-approver"
    (entry,) = _audited(http, operator, finance["id"])
    assert (entry["actor"], entry["scope"]) == ("fin-approver", "approver label:finance")


def test_a_signed_in_approver_has_its_role_and_scopes(
    stack_app: Flask, roles: dict[Role, dict[str, str]]
) -> None:
    http, svc = stack_app.test_client(), services_of(stack_app)
    svc.users.add("bea", PASSWORD, role=Role.APPROVER, scopes=["tool:calculator", "label:ops"])
    ops = _parked(http, roles[Role.OPERATOR], "ops")
    assert sign_in(http, "bea", PASSWORD).status_code == 302
    assert http.get("/api/v1/tokens").status_code == 403  # the operator's
    inbox = http.get("/approvals?view=mine")
    assert inbox.status_code == 200 and ops["id"] in inbox.text
    assert 'id="selection"' in inbox.text  # it may resolve: the selection bar is there


def _signoff(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SIGNOFF, *args],
        env={**os.environ, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_cli_resolves_as_the_named_account(
    stack_app: Flask, stack_env: dict[str, str], roles: dict[Role, dict[str, str]]
) -> None:
    http, svc = stack_app.test_client(), services_of(stack_app)
    finance, ops = (
        _parked(http, roles[Role.OPERATOR], "finance"),
        _parked(http, roles[Role.OPERATOR], "ops"),
    )
    added = _signoff(
        stack_env,
        *("user", "add", "carl", "--password", PASSWORD, "--role", "approver"),
        *("--scope", "tool:calculator", "--scope", "label:finance"),
    )
    assert added.returncode == 0, added.stderr
    assert "approver 'carl' within tool:calculator label:finance" in added.stdout
    bad = _signoff(stack_env, "user", "add", "dan", "--password", PASSWORD, "--scope", "color:red")
    assert bad.returncode != 0 and "must be kind:value" in bad.stderr
    refused = _signoff(stack_env, "approvals", "allow", ops["id"], "--as", "carl")
    assert refused.returncode == 1 and "outside the scopes of 'carl'" in refused.stderr
    assert svc.notifications.get(ops["id"]).status.value == "pending"
    bulk = _signoff(stack_env, "approvals", "allow", "--all", "--yes", "--as", "carl")
    assert bulk.returncode == 1 and "nothing was resolved" in bulk.stderr
    assert svc.notifications.get(ops["id"]).status.value == "pending"
    allowed = _signoff(stack_env, "approvals", "allow", finance["id"], "--as", "carl")
    assert allowed.returncode == 0, allowed.stderr
    note = svc.notifications.get(finance["id"])
    assert note.resolved_by == "cli:carl"
    listed = _signoff(stack_env, "user", "list").stdout
    (row,) = [line.split("\t") for line in listed.splitlines() if line.startswith("carl\t")]
    assert (row[1], row[3], row[4]) == ("enabled", "approver", "tool:calculator label:finance")
