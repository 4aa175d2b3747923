"""No token is taken for an internal owner (a batch, a trigger, a schedule): names cannot reach
that namespace, and tokens named so before the rule are renamed when the web starts."""

from __future__ import annotations

import logging

import pytest
from flask.testing import FlaskClient

from shared.models.config import ConversationConfig
from shared.models.users import Role
from shared.store.batches import batch_owner
from shared.store.users import TokenRecord
from tests.web.conftest import AppFactory, bearer, services_of
from webui.services import Services


@pytest.mark.parametrize("name", ["batch:b1", "trigger:deploys", "schedule:nightly", "ci:job"])
def test_a_token_cannot_be_named_like_an_internal_owner(
    http: FlaskClient, operator: dict[str, str], name: str
) -> None:
    answer = http.post("/api/v1/tokens", json={"name": name, "role": "submitter"}, headers=operator)
    assert answer.status_code == 422, answer.text
    assert "name" in answer.text and "':'" in answer.json["error"]["message"]
    listed = http.get("/api/v1/tokens", headers=operator).json["items"]
    assert name not in [t["name"] for t in listed]


def _old_token(svc: Services, name: str) -> str:
    """A token stored under `name` as a release before the rule could have stored it."""
    token = svc.tokens.issue("placeholder", Role.SUBMITTER)
    key, digest = svc.tokens.key, next(iter(svc.redis.hkeys(svc.tokens.key)))
    record = TokenRecord.model_validate_json(str(svc.redis.hget(key, digest)))
    svc.redis.hset(key, digest, record.model_copy(update={"name": name}).model_dump_json())
    return token.token


def test_an_old_token_named_after_a_batch_cannot_touch_the_batch(
    make_app: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app()
    svc = services_of(app)
    owner = batch_owner("b1")
    cid = svc.client.create(ConversationConfig(), conversation_id="b1-0", owner=owner)
    token = _old_token(svc, owner)
    assert cid.conversation_id == "b1-0"
    # Before a restart: the token is refused outright.
    refused = app.test_client().post("/api/v1/conversations/b1-0/abort", headers=bearer(token))
    assert refused.status_code == 401 and "internal owner" in refused.text
    # A restart renames it, saying which; renamed, it is a caller like any other.
    with caplog.at_level(logging.WARNING, logger="webui"):
        restarted = make_app(key_prefix=svc.settings.key_prefix)
    assert "'batch:b1'" in caplog.text and "'batch-b1'" in caplog.text
    http = restarted.test_client()
    for method, path in [
        ("POST", "/api/v1/conversations/b1-0/abort"),
        ("POST", "/api/v1/conversations/b1-0/close"),
        ("GET", "/api/v1/conversations/b1-0/files?path=hello.txt"),
    ]:
        answer = http.open(path, method=method, headers=bearer(token))
        assert answer.status_code == 403, (path, answer.text)
    assert svc.tokens.tokens()[0].name == "batch-b1"
