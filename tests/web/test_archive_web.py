"""Retention rules over the API, and an archived conversation's read-only page and restore."""

from __future__ import annotations

from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.archive.archiver import Archiver
from shared.models.steps import Step, StepStatus, UsageMetadata
from tests.s3_server import BUCKET, CREDENTIALS, S3Server
from tests.web.conftest import (
    OPERATOR,
    AppFactory,
    new_conversation,
    page_csrf,
    services_of,
    sign_in,
)
from webui.services import Services

USAGE = UsageMetadata.from_counts(10, 5)
HOSTILE = "<script>alert('archived')</script>"


@pytest.fixture
def app(make_app: AppFactory, tmp_path: Path) -> Flask:
    return make_app(archive_dir=str(tmp_path / "archive"))


def _archived(svc: Services, cid: str) -> None:
    steps = [
        Step.user_input(HOSTILE, turn_id="t1", index=0),
        Step.model_response(
            turn_id="t1", index=1, status=StepStatus.DONE, content="an answer", usage=USAGE
        ),
    ]
    svc.stores.history(cid).append(*steps, usage=USAGE, start_turn=True)
    assert Archiver(svc.redis, svc.keys, svc.settings).archive(cid)


def test_retention_rules_operators_write_and_every_role_reads(
    http: FlaskClient, operator: dict[str, str], submitter: dict[str, str], viewer: dict[str, str]
) -> None:
    rule = {"scope": "agent", "name": "triage", "seconds": 86400}
    assert http.put("/api/v1/retention", json=rule, headers=submitter).status_code == 403
    made = http.put("/api/v1/retention", json=rule, headers=operator)
    assert made.status_code == 200 and made.json == rule
    listed = http.get("/api/v1/retention", headers=viewer)
    assert listed.status_code == 200 and listed.json["items"] == [rule]

    for bad, why in (
        ({"scope": "agent", "name": "a:b", "seconds": 1}, "agent.name"),
        ({"scope": "agent", "name": "", "seconds": 1}, "agent.name"),  # schemathesis's find
        ({"scope": "global", "name": "x", "seconds": 1}, "global.name"),
        ({"scope": "team", "seconds": 1}, "scope"),
        ({"scope": "global", "seconds": -1}, "seconds"),
    ):
        refused = http.put("/api/v1/retention", json=bad, headers=operator)
        assert refused.status_code in (400, 422) and why in refused.text, refused.text
    removed = http.delete("/api/v1/retention/agent/triage", headers=operator)
    assert removed.status_code == 200 and removed.json["items"] == []
    again = http.delete("/api/v1/retention/agent/triage", headers=operator)
    assert again.status_code == 404 and "no retention rule" in again.json["error"]["message"]


def test_an_archived_conversation_reads_from_its_file_and_an_operator_restores_it(
    app: Flask, http: FlaskClient, submitter: dict[str, str], viewer: dict[str, str]
) -> None:
    svc = services_of(app)
    cid = new_conversation(http, submitter)
    _archived(svc, cid)
    assert http.get(f"/api/v1/conversations/{cid}", headers=viewer).status_code == 404
    read = http.get(f"/api/v1/archive/{cid}", headers=viewer)
    assert read.status_code == 200, read.text
    assert [step["content"] for step in read.json["steps"]] == [HOSTILE, "an answer"]
    assert read.json["usage"]["total_token_count"] == USAGE.total_token_count

    svc.users.add(*OPERATOR)
    assert sign_in(http).status_code == 302
    page = http.get(f"/conversations/{cid}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "archived" in html and "an answer" in html and HOSTILE not in html
    assert "&lt;script&gt;" in html and 'id="restore-form"' in html
    assert http.post(f"/api/v1/archive/{cid}/restore", headers=submitter).status_code == 403
    restored = http.post(f"/conversations/{cid}/restore", data={"csrf_token": page_csrf(http)})
    assert restored.status_code == 302
    assert svc.stores.history(cid).snapshot().steps[1].content == "an answer"
    assert http.get(f"/api/v1/archive/{cid}", headers=viewer).status_code == 404
    assert "restore-form" not in http.get(f"/conversations/{cid}").get_data(as_text=True)


def test_an_archived_conversation_reads_from_its_bucket(
    app: Flask,
    make_app: AppFactory,
    monkeypatch: pytest.MonkeyPatch,
    submitter: dict[str, str],
    viewer: dict[str, str],
) -> None:
    with S3Server.running() as server:
        for name, value in CREDENTIALS.items():
            monkeypatch.setenv(name, value)
        env = server.env("web")
        on_s3 = make_app(
            key_prefix=services_of(app).settings.key_prefix,  # the same users and tokens
            archive_url=env["SIGNOFF_ARCHIVE_URL"],
            archive_s3_endpoint_url=server.url,
            archive_s3_region="us-east-1",
        )
        http = on_s3.test_client()
        svc = services_of(on_s3)
        cid = new_conversation(http, submitter)
        _archived(svc, cid)
        listed = server.s3().list_objects_v2(Bucket=BUCKET, Prefix="web/")["Contents"]
        assert [item["Key"] for item in listed] == [f"web/{cid[:2].lower()}/{cid}.jsonl.gz"]
        read = http.get(f"/api/v1/archive/{cid}", headers=viewer)
        assert read.status_code == 200, read.text
        assert [step["content"] for step in read.json["steps"]] == [HOSTILE, "an answer"]

        server.stop()  # the bucket away: a clear 503, not a 500
        away = http.get(f"/api/v1/archive/{cid}", headers=viewer)
        assert away.status_code == 503, away.text
        assert f"s3://{BUCKET}/web/" in away.json["error"]["message"]
        assert CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in away.text
