"""Inbound triggers over HTTP: authenticated by their signature alone (401 without a good
one), idempotent by event id (a replay is a 409), managed by operators only (every role
reads them, never a secret); the triggers page."""

from __future__ import annotations

import json
import time

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from shared.models.agents import NewAgent
from shared.models.triggers import TriggerRequest
from shared.models.users import Role
from shared.store.triggers import TriggerStore
from shared.webhooks.signing import new_secret, signed_headers
from tests.web.conftest import bearer, form_csrf
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
        read = http.get("/api/v1/triggers", headers=caller)
        assert read.status_code == 200 and SECRET not in read.text  # every role reads them
        assert http.post("/api/v1/triggers", json=base, headers=caller).status_code == 403
        assert http.delete("/api/v1/triggers/issues", headers=caller).status_code == 403
        assert http.post("/api/v1/triggers/issues/secret", headers=caller).status_code == 403
    assert http.delete("/api/v1/triggers/issues", headers=operator).status_code == 200
    assert http.get("/api/v1/triggers/issues", headers=operator).status_code == 404


def test_a_rotated_secret_replaces_the_old_one_at_once(
    http: FlaskClient, trigger: str, operator: dict[str, str]
) -> None:
    rotated = http.post("/api/v1/triggers/issues/secret", headers=operator)
    assert rotated.status_code == 200, rotated.text
    fresh = rotated.json["secret"]
    assert fresh.startswith("whsec_") and fresh != SECRET
    assert rotated.json["url"].endswith("/api/v1/triggers/issues")
    assert _fire(http, "evt-old").status_code == 401  # signed with the old secret
    body = EVENT
    headers = signed_headers(fresh, "evt-new", int(time.time()), body)
    assert http.post("/api/v1/triggers/issues", data=body, headers=headers).status_code == 202
    assert http.get("/api/v1/triggers/issues", headers=operator).json["template"] == TEMPLATE
    missing = http.post("/api/v1/triggers/ghost/secret", headers=operator)
    assert missing.status_code == 404 and "no trigger 'ghost'" in missing.text


def test_the_triggers_page_shows_each_secret_once_and_escapes_what_it_lists(
    signed_in: FlaskClient, svc: Services
) -> None:
    svc.stores.agents.create(NewAgent(name="triage"), actor="test")
    page = signed_in.get("/triggers")
    assert page.status_code == 200 and "No triggers yet" in page.text
    assert 'href="/triggers">Triggers</a>' in signed_in.get("/agents").text  # in the nav
    token = form_csrf(page.text)
    form = {
        "csrf_token": token,
        "name": "issues",
        "agent": "triage",
        "template": "<b>{payload.title}</b>",
        "description": "<script>alert(1)</script>",
    }
    created = signed_in.post("/triggers", data=form)
    assert created.status_code == 201
    store = TriggerStore(svc.redis, svc.keys)
    first = store.get("issues").secret
    assert first in created.text and "/api/v1/triggers/issues" in created.text
    listed = signed_in.get("/triggers").text
    assert first not in listed and 'data-trigger="issues"' in listed
    assert "&lt;b&gt;{payload.title}&lt;/b&gt;" in listed and "<b>{payload" not in listed
    assert "<script>alert(1)" not in listed and "&lt;script&gt;" in listed
    rotated = signed_in.post("/triggers/issues/secret", data={"csrf_token": token})
    second = store.get("issues").secret
    assert rotated.status_code == 200 and second != first
    assert second in rotated.text and first not in rotated.text
    for changes, words in [
        ({"name": "bad", "template": "{payload.a!r}"}, "conversion"),
        ({"name": "lost", "agent": "ghost"}, "no agent named &#39;ghost&#39;"),
        ({"name": "issues"}, "exists"),
    ]:
        refused = signed_in.post("/triggers", data={**form, **changes})
        assert refused.status_code == 302
        assert words in signed_in.get("/triggers").text, changes
    assert [t.name for t in store.all()] == ["issues"]
    no_csrf = signed_in.post("/triggers/issues/delete", data={"csrf_token": ""})
    assert no_csrf.status_code == 403 and store.get("issues")
    deleted = signed_in.post("/triggers/issues/delete", data={"csrf_token": token})
    assert deleted.status_code == 302 and store.all() == []
    assert "Trigger issues deleted." in signed_in.get("/triggers").text


def test_every_role_reads_the_triggers_page_and_only_operators_change_it(
    http: FlaskClient, svc: Services, tokens: dict[Role, str]
) -> None:
    svc.stores.agents.create(NewAgent(name="triage"), actor="test")
    request = TriggerRequest(name="issues", agent="triage", template="{payload.title}")
    secret = TriggerStore(svc.redis, svc.keys).create(request, actor="test").secret
    for role in (Role.VIEWER, Role.SUBMITTER):
        caller = bearer(tokens[role])
        page = http.get("/triggers", headers=caller)
        assert page.status_code == 200 and 'data-trigger="issues"' in page.text
        assert "{payload.title}" in page.text and secret not in page.text
        assert 'id="new-trigger"' not in page.text and "New secret" not in page.text
        form = {"name": "other", "agent": "triage", "template": "x"}
        assert http.post("/triggers", data=form, headers=caller).status_code == 403
        assert http.post("/triggers/issues/secret", headers=caller).status_code == 403
        assert http.post("/triggers/issues/delete", headers=caller).status_code == 403
    assert TriggerStore(svc.redis, svc.keys).get("issues").secret == secret
    assert http.get("/triggers").status_code in (302, 401)  # no one signed in
