"""Separation of duties against a real worker: whoever created a conversation (or its batch)
may not approve its calls, by default unless an operator, or as the tool's rule says."""

from __future__ import annotations

from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from shared.models.config import ToolPolicy
from shared.models.users import Role
from shared.store.policy import PolicyRule
from tests.web.conftest import (
    batch_when,
    bearer,
    new_conversation,
    services_of,
    submit_batch,
    wait_for,
)

ALLOW = {"kind": "allow"}
CALL = 'call calculator {"expression": "6*7"}'


def _parked(http: FlaskClient, creator: dict[str, str], **options: Any) -> str:
    """The id of a pending calculator call in a conversation `creator` made."""
    cid = new_conversation(http, creator, tools={"calculator": "ask"}, **options)
    sent = http.post(f"/api/v1/conversations/{cid}/prompts", json={"text": CALL}, headers=creator)
    assert sent.status_code == 202, sent.text
    url = f"/api/v1/notifications?conversation_id={cid}"
    return str(wait_for(lambda: http.get(url, headers=creator).json["items"], "a call")[0]["id"])


def _resolve(http: FlaskClient, nid: str, headers: dict[str, str]) -> Any:
    return http.post(f"/api/v1/notifications/{nid}/resolve", json=ALLOW, headers=headers)


def test_a_creator_cannot_approve_its_own_call(stack_app: Flask) -> None:
    http, svc = stack_app.test_client(), services_of(stack_app)
    # one person, two credentials: a token to submit with, another to approve with
    sam_submits = bearer(svc.tokens.create("sam", Role.SUBMITTER))
    sam_approves = bearer(svc.tokens.create("sam", Role.APPROVER))
    pat = bearer(svc.tokens.create("pat", Role.APPROVER))

    own = _parked(http, sam_submits)
    refused = _resolve(http, own, sam_approves)
    assert refused.status_code == 403
    message = refused.json["error"]["message"]
    assert message.startswith("separation of duties: 'sam' created conversation")
    assert "another approver must decide" in message
    assert svc.notifications.get(own).status.value == "pending"  # nothing written
    assert _resolve(http, own, pat).status_code == 200

    items = [{"id": "b1", "prompt": CALL}]
    config = {"conversation": {"tools": {"calculator": "ask"}}}
    bid = submit_batch(http, sam_submits, items, config=config)["batch"]["id"]
    batch_when(http, pat, bid, lambda d: d["pending_approvals"] == 1)
    (note,) = http.get(f"/api/v1/notifications?batch={bid}", headers=pat).json["items"]
    batch_refused = _resolve(http, note["id"], sam_approves)
    assert batch_refused.status_code == 403
    assert f"'sam' created batch {bid}" in batch_refused.json["error"]["message"]

    # the rule may let a creator approve
    svc.policies.set(
        PolicyRule(tool="calculator", policy=ToolPolicy.ASK, separation=False), actor="test"
    )
    try:
        assert _resolve(http, note["id"], sam_approves).status_code == 200
    finally:
        svc.policies.remove("calculator", actor="test")


def test_an_operator_creator_approves_unless_the_rule_says_otherwise(stack_app: Flask) -> None:
    http, svc = stack_app.test_client(), services_of(stack_app)
    olga = bearer(svc.tokens.create("olga", Role.OPERATOR))
    first = _parked(http, olga, labels=["payments"])
    assert _resolve(http, first, olga).status_code == 200  # the default spares operators
    svc.policies.set(
        PolicyRule(tool="calculator", policy=ToolPolicy.ASK, label="payments", separation=True),
        actor="test",
    )
    try:
        second = _parked(http, olga, labels=["payments"])
        refused = _resolve(http, second, olga)
        assert refused.status_code == 403
        assert "the tool policy for calculator says so" in refused.json["error"]["message"]
        other = _parked(http, olga, labels=["other"])  # the label rule does not reach it
        assert _resolve(http, other, olga).status_code == 200
    finally:
        svc.policies.remove("calculator", label="payments", actor="test")
