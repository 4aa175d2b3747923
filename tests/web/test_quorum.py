"""Quorum against a real worker: a call whose rule needs N approvers stays parked until N
distinct approvers allowed the same arguments; a deny ends it; it resumes exactly once,
even under 1,000 concurrent allows from 3 approvers on a 2-of-3 request."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from cli.approver import AccountCaller
from shared.approvers import ResolveCheck
from shared.client import Client
from shared.errors import Conflict
from shared.models.config import ToolPolicy
from shared.models.events import NotificationEvent
from shared.models.notifications import Allow
from shared.models.steps import StepType
from shared.models.users import Role
from shared.store.policy import PolicyRule
from tests.stack import ROOT
from tests.web.conftest import bearer, new_conversation, services_of, wait_for

SIGNOFF = str(Path(sys.executable).with_name("signoff"))


def _parked(http: FlaskClient, operator: dict[str, str], label: str, expression: str) -> str:
    cid = new_conversation(http, operator, tools={"calculator": "ask"}, labels=[label])
    text = f'call calculator {{"expression": "{expression}"}}'
    sent = http.post(f"/api/v1/conversations/{cid}/prompts", json={"text": text}, headers=operator)
    assert sent.status_code == 202, sent.text
    url = f"/api/v1/notifications?conversation_id={cid}"
    return str(wait_for(lambda: http.get(url, headers=operator).json["items"], "a call")[0]["id"])


def _results(client: Client, cid: str) -> list[Any]:
    steps = client.stores.history(cid).steps()
    return [step for step in steps if step.type is StepType.TOOL_RESULT]


def test_two_of_two_with_edits_and_a_deny(
    stack_app: Flask, stack_env: dict[str, str], client: Client
) -> None:
    http, svc = stack_app.test_client(), services_of(stack_app)
    operator = bearer(svc.tokens.create("quorum-op", Role.OPERATOR))
    ann, ben = (bearer(svc.tokens.create(n, Role.APPROVER)) for n in ("ann", "ben"))
    rule = subprocess.run(
        [SIGNOFF, "policy", "set", "calculator", "ask", "--approvals", "2", "--label", "two"],
        env={**os.environ, **stack_env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert rule.returncode == 0 and "(2 approvals)" in rule.stdout, rule.stderr
    try:
        nid = _parked(http, operator, "two", "6*7")
        url = f"/api/v1/notifications/{nid}/resolve"
        first = http.post(url, json={"kind": "allow"}, headers=ann)
        assert first.status_code == 200, first.text
        assert first.json["status"] == "pending" and first.json["approvals_needed"] == 2
        assert [a["by"] for a in first.json["allowed_by"]] == ["ann"]
        again = http.post(url, json={"kind": "allow"}, headers=ann)  # the same approver twice
        assert again.json["status"] == "pending"
        edited = {"kind": "allow", "arguments": {"expression": "6*8"}}
        other = http.post(url, json=edited, headers=ben)  # other arguments do not add up
        assert other.json["status"] == "pending"
        assert len({a["arguments_hash"] for a in other.json["allowed_by"]}) == 2
        cid = other.json["conversation_id"]
        assert _results(client, cid) == []  # nothing ran
        done = http.post(url, json=edited, headers=ann)  # ann now allows the edit too
        assert done.status_code == 200 and done.json["status"] == "resolved"
        assert done.json["resolution"]["arguments"] == {"expression": "6*8"}
        (result,) = wait_for(lambda: _results(client, cid), "the call's result")
        assert "48" in result.content
        late = http.post(url, json={"kind": "allow"}, headers=ben)
        assert late.status_code == 409

        denied = _parked(http, operator, "two", "1+1")
        deny_url = f"/api/v1/notifications/{denied}/resolve"
        assert http.post(deny_url, json={"kind": "allow"}, headers=ann).json["status"] == "pending"
        stop = http.post(deny_url, json={"kind": "deny", "reason": "no"}, headers=ben)
        assert stop.status_code == 200 and stop.json["status"] == "resolved"
        assert stop.json["resolution"]["kind"] == "deny"
        audit = http.get("/api/v1/audit?limit=100", headers=operator).json["items"]
        mine = [(e["status"], e["actor"]) for e in audit if e["notification_id"] == nid]
        assert Counter(mine) == Counter(
            {("pending", "ann"): 2, ("pending", "ben"): 1, ("resolved", "ann"): 1}
        )
    finally:
        svc.policies.remove("calculator", label="two", actor="test")


def test_a_thousand_concurrent_allows_resume_once(stack_app: Flask, client: Client) -> None:
    http, svc = stack_app.test_client(), services_of(stack_app)
    operator = bearer(svc.tokens.create("burst-op", Role.OPERATOR))
    svc.policies.set(
        PolicyRule(tool="calculator", policy=ToolPolicy.ASK, label="three", approvals=2),
        actor="test",
    )
    try:
        nid = _parked(http, operator, "three", "2+3")
        checks = [
            ResolveCheck(AccountCaller(name, Role.APPROVER), client.stores)
            for name in ("a1", "a2", "a3")
        ]

        def allow(i: int) -> str:
            check = checks[i % 3]
            try:
                note = client.notifications.resolve(nid, Allow(), actor=check.identity, check=check)
            except Conflict:
                return "conflict"
            return note.status.value

        with ThreadPoolExecutor(max_workers=48) as pool:
            outcomes = Counter(pool.map(allow, range(1000)))
    finally:
        svc.policies.remove("calculator", label="three", actor="test")
    note = client.notifications.get(nid)
    assert note.status.value == "resolved"
    audit = [e for e in client.notifications.audit(count=5000) if e["notification_id"] == nid]
    assert [e["status"] for e in audit].count("resolved") == 1  # settled exactly once
    assert outcomes["conflict"] + outcomes["resolved"] + outcomes["pending"] == 1000
    # an allow that parked may read the request back already settled by the next one
    assert outcomes["conflict"] >= 900 and outcomes["resolved"] >= 1, outcomes
    print("1,000 concurrent allows, 3 approvers, 2-of-3:", dict(outcomes))
    (result,) = wait_for(lambda: _results(client, note.conversation_id), "the call's result")
    assert "5" in result.content
    settled = [
        event
        for event in client.stores.events.after(note.conversation_id, count=10_000)
        if isinstance(event, NotificationEvent) and event.notification_id == nid
    ]
    assert [event.status for event in settled].count("resolved") == 1  # one resume
