"""One record that does not parse never takes a listing down: it is left out and logged once.

The corrupt records are written straight into the test's Redis, as an old release, a bad
migration or a hand edit would leave them.
"""

from __future__ import annotations

import logging
import time

import pytest
from flask.testing import FlaskClient

from shared.models.batches import BatchConfig
from tests.web.conftest import new_conversation
from webui.services import Services

UNREADABLE = "webui.unreadable"

# Each makes the conversation hash unreadable in its own way.
CORRUPT_CONVERSATIONS = {
    "null-timeout": {"config": '{"limits":{"timeout_s":null}}'},
    "not-json": {"config": "{not json"},
    "bad-status": {"config": "{}", "status": "exploded"},
    "bad-time": {"config": "{}", "created_at": "yesterday"},
}


def _warnings(caplog: pytest.LogCaptureFixture, key: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == UNREADABLE and r.levelno == logging.WARNING and key in r.getMessage()
    ]


def _corrupt_conversation(svc: Services, cid: str, fields: dict[str, str]) -> str:
    key = svc.keys.conversation(cid)
    stamp = str(time.time())
    base = {"status": "idle", "closed": "0", "created_at": stamp, "updated_at": stamp}
    svc.redis.hset(key, mapping=base | fields)
    svc.redis.zadd(svc.keys.conversations(0), {cid: time.time() + 1})  # the newest
    return key


@pytest.mark.parametrize("kind", sorted(CORRUPT_CONVERSATIONS))
def test_a_corrupt_conversation_is_left_out_of_every_listing(
    http: FlaskClient,
    submitter: dict[str, str],
    svc: Services,
    caplog: pytest.LogCaptureFixture,
    kind: str,
) -> None:
    good = new_conversation(http, submitter)
    key = _corrupt_conversation(svc, f"bad-{kind}", CORRUPT_CONVERSATIONS[kind])
    caplog.set_level(logging.WARNING, logger=UNREADABLE)

    listed = http.get("/api/v1/conversations", headers=submitter)
    assert listed.status_code == 200, listed.text
    assert [item["id"] for item in listed.json["items"]] == [good]
    assert len(_warnings(caplog, key)) == 1  # named once, at WARNING

    idle = http.get("/api/v1/conversations?status=idle", headers=submitter)
    assert idle.status_code == 200, idle.text
    assert [item["id"] for item in idle.json["items"]] == [good]

    single = http.get(f"/api/v1/conversations/bad-{kind}", headers=submitter)
    assert single.status_code == 500
    assert single.json["error"]["code"] == "corrupt_record"
    assert key in single.json["error"]["message"]


def test_conversation_pages_survive_a_corrupt_record(
    signed_in: FlaskClient, svc: Services, caplog: pytest.LogCaptureFixture
) -> None:
    fields = CORRUPT_CONVERSATIONS["null-timeout"] | {"last_turn_status": "failed"}
    key = _corrupt_conversation(svc, "bad-page", fields)
    svc.redis.zadd(svc.keys.failures(0), {"bad-page": time.time()})  # the home page reads it
    caplog.set_level(logging.WARNING, logger=UNREADABLE)
    home = signed_in.get("/", follow_redirects=True)
    assert home.status_code == 200
    for path in ("/conversations", "/conversations?status=idle"):
        page = signed_in.get(path)
        assert page.status_code == 200, path
        assert "bad-page" not in page.text
    assert len(_warnings(caplog, key)) == 3  # one per request: /, /conversations, ?status=idle


def _corrupt_batch(svc: Services, bid: str, fields: dict[str, str]) -> str:
    key = svc.keys.batch(bid)
    base = {"status": "running", "total": "0", "created_at": str(time.time())}
    svc.redis.hset(key, mapping=base | fields)
    svc.redis.zadd(svc.keys.batches(), {bid: time.time() + 1})
    return key


@pytest.mark.parametrize(
    "fields",
    [
        {"config": '{"max_concurrency": 0}'},
        {"config": "[]"},
        {"status": "whatever"},
        {"total": "many"},
    ],
    ids=["bad-config", "config-not-object", "bad-status", "bad-total"],
)
def test_a_corrupt_batch_is_left_out_of_the_listing(
    http: FlaskClient,
    signed_in: FlaskClient,
    viewer: dict[str, str],
    svc: Services,
    caplog: pytest.LogCaptureFixture,
    fields: dict[str, str],
) -> None:
    good = svc.batches.create(BatchConfig())
    key = _corrupt_batch(svc, "badbatch", {"config": "{}"} | fields)
    caplog.set_level(logging.WARNING, logger=UNREADABLE)

    listed = http.get("/api/v1/batches", headers=viewer)
    assert listed.status_code == 200, listed.text
    assert [item["id"] for item in listed.json["items"]] == [good]
    assert len(_warnings(caplog, key)) == 1

    page = signed_in.get("/batches")
    assert page.status_code == 200
    assert good in page.text and "badbatch" not in page.text

    single = http.get("/api/v1/batches/badbatch", headers=viewer)
    assert single.status_code == 500
    assert single.json["error"]["code"] == "corrupt_record"
    assert key in single.json["error"]["message"]


def test_a_corrupt_notification_is_left_out_of_the_inbox(
    http: FlaskClient,
    signed_in: FlaskClient,
    viewer: dict[str, str],
    svc: Services,
    caplog: pytest.LogCaptureFixture,
) -> None:
    nid = "conv1.broken"
    key = svc.keys.notification(nid)
    svc.redis.hset(key, mapping={"doc": "{not json", "status": "pending"})
    svc.redis.zadd(svc.keys.notifications_pending(), {nid: time.time()})
    caplog.set_level(logging.WARNING, logger=UNREADABLE)

    listed = http.get("/api/v1/notifications", headers=viewer)
    assert listed.status_code == 200, listed.text
    assert listed.json["items"] == []
    assert len(_warnings(caplog, key)) == 1

    page = signed_in.get("/approvals")
    assert page.status_code == 200
    single = http.get(f"/api/v1/notifications/{nid}", headers=viewer)
    assert single.status_code == 500
    assert key in single.json["error"]["message"]


def test_a_corrupt_audit_entry_is_left_out_and_paging_goes_past_it(
    http: FlaskClient,
    signed_in: FlaskClient,
    viewer: dict[str, str],
    svc: Services,
    caplog: pytest.LogCaptureFixture,
) -> None:
    entry = {"notification_id": "c.n", "conversation_id": "c", "actor": "ada", "kind": "deny"}
    older = svc.redis.xadd(svc.keys.audit(), entry | {"at": str(time.time())})
    broken = svc.redis.xadd(svc.keys.audit(), entry | {"at": "soon"})
    caplog.set_level(logging.WARNING, logger=UNREADABLE)

    listed = http.get("/api/v1/audit", headers=viewer)
    assert listed.status_code == 200, listed.text
    assert [item["id"] for item in listed.json["items"]] == [older]
    assert len(_warnings(caplog, str(broken))) == 1

    first = http.get("/api/v1/audit?limit=1", headers=viewer).json
    assert first == {"items": [], "next_before": broken}  # the page is short, not the log
    second = http.get(f"/api/v1/audit?limit=1&before={broken}", headers=viewer).json
    assert [item["id"] for item in second["items"]] == [older]

    assert signed_in.get("/audit").status_code == 200
