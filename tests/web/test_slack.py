"""Slack against a real worker and a Slack API stand-in on loopback: a route posts the
request with Allow and Deny buttons; signed interactions resolve as the mapped account and
update the message; a bad or stale signature is a 401, an unknown user a 403, a replay
changes nothing; Deny asks the reason in a modal."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.client import Client
from shared.models.routes import Route
from shared.models.users import Role
from shared.settings import Settings
from shared.store.routes import RouteStore
from tests.stack import WorkerProcess
from tests.web.conftest import SECRET, bearer, new_conversation, services_of, wait_for
from tests.wire_servers import WireServer, json_reply
from webui import create_app

SIGNING = "slack-signing-secret-for-tests"
POSTED = {"ok": True, "channel": "C0APPROVE", "ts": "1790000000.000100"}


@pytest.fixture(scope="module")
def slack_api() -> Iterator[WireServer]:
    with WireServer() as server:
        server.script(*[json_reply(200, POSTED)] * 50, path="/api/chat.postMessage")
        server.script(*[json_reply(200, {"ok": True})] * 50, path="/api/chat.update")
        server.script(*[json_reply(200, {"ok": True})] * 20, path="/api/views.open")
        yield server


@pytest.fixture(scope="module")
def stack_env(stack_env: dict[str, str], slack_api: WireServer) -> dict[str, str]:
    return {
        **stack_env,
        "SIGNOFF_SLACK_BOT_TOKEN": "xoxb-test",
        "SIGNOFF_SLACK_API_URL": slack_api.url + "/api",
        "SIGNOFF_OUTBOUND_ALLOW": "127.0.0.1",  # the stand-in is on loopback
    }


@pytest.fixture(scope="module")
def slack_app(stack_env: dict[str, str], worker: WorkerProcess) -> Iterator[Flask]:
    settings = Settings(
        redis_url=stack_env["SIGNOFF_REDIS_URL"],
        key_prefix=stack_env["SIGNOFF_KEY_PREFIX"],
        secret_key=SECRET,
        slack_signing_secret=SIGNING,
        slack_bot_token="xoxb-test",
        slack_api_url=stack_env["SIGNOFF_SLACK_API_URL"],
        outbound_allow=("127.0.0.1",),
    )
    app = create_app(settings)
    yield app
    services_of(app).close()


def _signed(payload: dict[str, Any], *, at: float | None = None, secret: str = SIGNING) -> Any:
    body = urlencode({"payload": json.dumps(payload)})
    stamp = str(int(time.time() if at is None else at))
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256)
    return {
        "data": body,
        "content_type": "application/x-www-form-urlencoded",
        "headers": {
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": "v0=" + digest.hexdigest(),
        },
    }


def _click(user: str, action: str, nid: str) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": user},
        "trigger_id": "trigger-1",
        "actions": [{"action_id": action, "value": nid}],
    }


def _park(http: FlaskClient, operator: dict[str, str]) -> str:
    cid = new_conversation(http, operator, tools={"calculator": "ask"}, labels=["slack"])
    text = 'call calculator {"expression": "4*4"}'
    sent = http.post(f"/api/v1/conversations/{cid}/prompts", json={"text": text}, headers=operator)
    assert sent.status_code == 202, sent.text
    url = f"/api/v1/notifications?conversation_id={cid}"
    return str(wait_for(lambda: http.get(url, headers=operator).json["items"], "a call")[0]["id"])


def _calls(server: WireServer, method: str) -> list[Any]:
    return [r.json() for r in server.requests if r.path == f"/api/{method}"]


def test_slack_buttons_resolve_as_the_mapped_account(
    slack_app: Flask, slack_api: WireServer, client: Client
) -> None:
    http, svc = slack_app.test_client(), services_of(slack_app)
    operator = bearer(svc.tokens.create("slack-op", Role.OPERATOR))
    svc.users.add("uma", "a-long-passphrase", role=Role.APPROVER)
    svc.users.set_slack_user("uma", "U0UMA", actor="test")
    RouteStore(client.redis, client.keys).add(
        Route(name="s", label="slack", slack_channel="approvals")
    )
    nid = _park(http, operator)
    posted = wait_for(
        lambda: [b for b in _calls(slack_api, "chat.postMessage") if nid in json.dumps(b)],
        "the Slack post",
    )[0]
    assert posted["channel"] == "approvals"
    buttons = posted["blocks"][1]["elements"]
    assert [(b["action_id"], b["value"]) for b in buttons] == [
        ("signoff_allow", nid),
        ("signoff_deny", nid),
    ]
    url = "/api/v1/slack/interactions"
    assert (
        http.post(url, **_signed(_click("U0UMA", "signoff_allow", nid), secret="wrong")).status_code
        == 401
    )
    stale = http.post(url, **_signed(_click("U0UMA", "signoff_allow", nid), at=time.time() - 600))
    assert stale.status_code == 401
    stranger = http.post(url, **_signed(_click("U0NOBODY", "signoff_allow", nid)))
    assert stranger.status_code == 403
    assert client.notifications.get(nid).status.value == "pending"

    click = _signed(_click("U0UMA", "signoff_allow", nid))
    assert http.post(url, **click).status_code == 200
    note = client.notifications.get(nid)
    assert (note.status.value, note.resolved_by) == ("resolved", "uma")
    updated = _calls(slack_api, "chat.update")[-1]
    assert (updated["channel"], updated["ts"]) == (POSTED["channel"], POSTED["ts"])
    assert "Allowed by uma" in updated["text"]
    assert http.post(url, **click).status_code == 200  # a replay: nothing changes
    audit = [e for e in client.notifications.audit(count=500) if e["notification_id"] == nid]
    assert len(audit) == 1 and client.notifications.get(nid).resolved_at == note.resolved_at

    denied = _park(http, operator)
    wait_for(
        lambda: [b for b in _calls(slack_api, "chat.postMessage") if denied in json.dumps(b)],
        "post",
    )
    assert http.post(url, **_signed(_click("U0UMA", "signoff_deny", denied))).status_code == 200
    modal = _calls(slack_api, "views.open")[-1]
    assert modal["view"]["private_metadata"] == denied and modal["trigger_id"] == "trigger-1"
    assert client.notifications.get(denied).status.value == "pending"  # the modal asks first
    submission = {
        "type": "view_submission",
        "user": {"id": "U0UMA"},
        "view": {
            "callback_id": "signoff_deny_reason",
            "private_metadata": denied,
            "state": {"values": {"reason": {"reason": {"value": "not today"}}}},
        },
    }
    assert http.post(url, **_signed(submission)).status_code == 200
    final = client.notifications.get(denied)
    assert final.resolution is not None and final.resolution.kind == "deny"
    assert "Denied by uma: not today" in _calls(slack_api, "chat.update")[-1]["text"]


def test_a_request_decided_elsewhere_updates_its_slack_message(
    slack_app: Flask, slack_api: WireServer, client: Client
) -> None:
    http, svc = slack_app.test_client(), services_of(slack_app)
    operator = bearer(svc.tokens.create("slack-op2", Role.OPERATOR))
    routes = RouteStore(client.redis, client.keys)
    if not [r for r in routes.all() if r.name == "s"]:
        routes.add(Route(name="s", label="slack", slack_channel="approvals"))
    nid = _park(http, operator)
    wait_for(lambda: client.redis.exists(client.keys.slack_messages(nid)), "the post's ts")
    url = f"/api/v1/notifications/{nid}/resolve"
    assert (
        http.post(
            url, json={"kind": "deny", "reason": "from the inbox"}, headers=operator
        ).status_code
        == 200
    )
    wait_for(
        lambda: [
            u
            for u in _calls(slack_api, "chat.update")
            if "Denied by slack-op2: from the inbox" in u["text"]
        ],
        "the message updated from the worker",
    )
