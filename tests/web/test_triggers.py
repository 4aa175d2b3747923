"""Inbound triggers over HTTP: authenticated by their signature alone (401 without a good
one), idempotent by event id (a replay is a 409), managed by operators only."""

from __future__ import annotations

import json
import time

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from shared.models.agents import NewAgent
from shared.webhooks.signing import new_secret, signed_headers
from webui.services import Services

SECRET = new_secret()
TEMPLATE = "Triage {payload.issue.title} (#{payload.issue.number}) labels {payload.labels}"
EVENT = json.dumps({"issue": {"title": "Crash", "number": 7}, "labels": ["bug"]})


@pytest.fixture
def trigger(http: FlaskClient, operator: dict[str, str], svc: Services) -> str:
    svc.stores.agents.create(NewAgent(name="triage"), actor="test")
    body = {"name": "issues", "agent": "triage", "template": TEMPLATE, "secret": SECRET}
    created = http.post("/api/v1/triggers", json=body, headers=operator)
    assert created.status_code == 201, created.text
    assert created.json["url"].endswith("/api/v1/triggers/issues")
    return "issues"


def _fire(http: FlaskClient, event_id: str, *, body: str = EVENT, **overrides: str) -> TestResponse:
    headers = signed_headers(SECRET, event_id, int(time.time()), body) | overrides
    return http.post("/api/v1/triggers/issues", data=body, headers=headers)


def test_an_event_starts_one_conversation_and_a_replay_is_a_409(
    http: FlaskClient, trigger: str, svc: Services
) -> None:
    fired = _fire(http, "evt-1")
    assert fired.status_code == 202, fired.text
    cid = fired.json["conversation_id"]
    record = svc.store.get(cid)
    assert record.owner == "trigger:issues" and record.config.agent == "triage"
    turn = svc.store.turn(cid, fired.json["turn_id"])
    assert turn.prompt.text == 'Triage Crash (#7) labels ["bug"]'
    replayed = _fire(http, "evt-1")
    assert replayed.status_code == 409
    error = replayed.json["error"]
    assert error["code"] == "duplicate_event" and cid in error["message"]
    assert replayed.headers["Location"].endswith(f"/conversations/{cid}")
    other = _fire(http, "evt-2")
    assert other.status_code == 202
    assert other.json["conversation_id"] != cid


def test_a_missing_or_bad_signature_is_a_401_whoever_calls(
    http: FlaskClient, trigger: str, operator: dict[str, str]
) -> None:
    bare = http.post("/api/v1/triggers/issues", data=EVENT)
    assert bare.status_code == 401 and "missing webhook-id" in bare.text
    forged = signed_headers(new_secret(), "evt-9", int(time.time()), EVENT)
    wrong_key = http.post("/api/v1/triggers/issues", data=EVENT, headers=forged)
    assert wrong_key.status_code == 401 and "does not match" in wrong_key.text
    changed = signed_headers(SECRET, "evt-10", int(time.time()), EVENT)
    other_body = http.post("/api/v1/triggers/issues", data=EVENT + " ", headers=changed)
    assert other_body.status_code == 401
    as_operator = http.post("/api/v1/triggers/issues", data=EVENT, headers=operator)
    assert as_operator.status_code == 401  # a user token is no signature


def test_a_timestamp_outside_the_window_is_refused_as_a_replay(
    http: FlaskClient, trigger: str
) -> None:
    old = int(time.time()) - 3600
    stale = http.post(
        "/api/v1/triggers/issues", data=EVENT, headers=signed_headers(SECRET, "evt-3", old, EVENT)
    )
    assert stale.status_code == 401 and "replay" in stale.text
    assert _fire(http, "evt-3", **{"webhook-timestamp": "soon"}).status_code == 401


def test_an_event_the_template_cannot_fill_is_a_422_and_can_be_sent_again(
    http: FlaskClient, trigger: str
) -> None:
    partial = json.dumps({"issue": {"title": "Crash"}})
    refused = _fire(http, "evt-4", body=partial)
    assert refused.status_code == 422
    assert "payload.issue.number" in refused.text
    not_json = _fire(http, "evt-5", body="{oops")
    assert not_json.status_code == 422 and "JSON" in not_json.text
    assert _fire(http, "evt-4").status_code == 202


def test_an_unknown_trigger_answers_like_a_wrong_signature(http: FlaskClient) -> None:
    """From outside, a name cannot be told from a secret that is wrong: no probing for names."""
    unknown = http.post("/api/v1/triggers/nothing", data="{}")
    assert unknown.status_code == 401 and "signature does not match" in unknown.text
    assert "nothing" not in unknown.json["error"]["message"].replace("trigger nothing: ", "")


def test_operators_manage_triggers_and_bad_definitions_are_named(
    http: FlaskClient,
    trigger: str,
    operator: dict[str, str],
    submitter: dict[str, str],
    viewer: dict[str, str],
) -> None:
    listed = http.get("/api/v1/triggers", headers=operator).json["items"]
    assert [t["name"] for t in listed] == ["issues"] and "secret" not in listed[0]
    shown = http.get("/api/v1/triggers/issues", headers=operator).json
    assert shown["template"] == TEMPLATE
    base = {"name": "t2", "agent": "triage", "template": "x"}
    for body, status, words in [
        ({**base, "name": "issues"}, 409, "exists"),
        ({**base, "agent": "ghost"}, 404, "ghost"),
        ({**base, "template": "{payload.a[0]}"}, 422, "must be a path"),
        ({**base, "template": "{os.system}"}, 422, "must be a path"),
        ({**base, "template": "{payload.a!r}"}, 422, "conversion"),
        ({**base, "template": "{payload"}, 422, "template"),
        ({**base, "name": "has space"}, 422, "name"),
    ]:
        answer = http.post("/api/v1/triggers", json=body, headers=operator)
        assert answer.status_code == status, (body, answer.text)
        assert words in answer.text
    for caller in (submitter, viewer):
        assert http.get("/api/v1/triggers", headers=caller).status_code == 403
        assert http.post("/api/v1/triggers", json=base, headers=caller).status_code == 403
        assert http.delete("/api/v1/triggers/issues", headers=caller).status_code == 403
    assert http.delete("/api/v1/triggers/issues", headers=operator).status_code == 200
    assert http.get("/api/v1/triggers/issues", headers=operator).status_code == 404
