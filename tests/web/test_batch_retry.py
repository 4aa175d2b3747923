"""Retrying a batch's ended items through the API and the batch page, with a real worker."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.models.users import Role
from tests.web.conftest import (
    OPERATOR,
    batch_when,
    bearer,
    form_csrf,
    services_of,
    sign_in,
    submit_batch,
)

ITEMS = [{"id": "ok", "prompt": "fine"}, {"id": "bad", "prompt": "please #fail"}]


def test_retry_needs_a_token(http: FlaskClient) -> None:
    response = http.post("/api/v1/batches/b1/retry", json={})
    assert response.status_code == 401


def test_retry_refuses_an_unknown_batch_and_a_bad_body(
    http: FlaskClient, submitter: dict[str, str]
) -> None:
    missing = http.post("/api/v1/batches/nope/retry", json={}, headers=submitter)
    assert missing.status_code == 404 and "batch nope does not exist" in missing.text
    for body in (
        {"statuses": ["bogus"]},
        {"statuses": []},
        {"error": ""},
        {"tool": "x y"},
        {"x": 1},
    ):
        bad = http.post("/api/v1/batches/nope/retry", json=body, headers=submitter)
        assert bad.status_code == 422, body


@pytest.fixture
def stack_http(stack_app: Flask) -> FlaskClient:
    return stack_app.test_client()


def _ended(http: FlaskClient, roles: dict[Role, dict[str, str]]) -> str:
    bid = str(submit_batch(http, roles[Role.SUBMITTER], ITEMS)["batch"]["id"])
    batch_when(http, roles[Role.VIEWER], bid, lambda d: d["status"] == "done")
    return bid


def _results(http: FlaskClient, headers: dict[str, str], bid: str) -> list[dict[str, Any]]:
    text = http.get(f"/api/v1/batches/{bid}/results", headers=headers).text
    return [json.loads(line) for line in text.splitlines()]


def test_retry_through_the_api_by_whom_may_create_batches(
    stack_http: FlaskClient, stack_app: Flask, roles: dict[Role, dict[str, str]]
) -> None:
    http = stack_http
    bid = _ended(http, roles)
    url = f"/api/v1/batches/{bid}/retry"
    assert http.post(url, json={}, headers=roles[Role.VIEWER]).status_code == 403
    other = bearer(services_of(stack_app).tokens.create("someone else", Role.SUBMITTER))
    refused = http.post(url, json={}, headers=other)
    assert refused.status_code == 403  # only the batch's creator, or an operator
    nothing = http.post(url, json={"statuses": ["denied"]}, headers=roles[Role.SUBMITTER])
    assert nothing.status_code == 202 and nothing.json["retried"] == 0
    response = http.post(
        url, json={"statuses": ["failed"], "error": "SCRIPTED"}, headers=roles[Role.SUBMITTER]
    )
    assert response.status_code == 202, response.text
    assert response.json["retried"] == 1 and response.json["skipped"] == []
    assert response.json["batch"]["status"] == "running"
    done = batch_when(http, roles[Role.VIEWER], bid, lambda d: d["status"] == "done")
    assert (done["counts"]["done"], done["counts"]["failed"], done["total"]) == (1, 1, 2)
    found = _results(http, roles[Role.VIEWER], bid)
    assert [(r["id"], r["attempts"]) for r in found] == [("ok", 1), ("bad", 2)]
    assert found[1]["conversation_id"].endswith(".2")
    operator = http.post(url, json={}, headers=roles[Role.OPERATOR])  # any batch's
    assert operator.status_code == 202 and operator.json["retried"] == 1


def test_the_batch_page_retries_with_its_form(
    stack_http: FlaskClient, stack_app: Flask, roles: dict[Role, dict[str, str]]
) -> None:
    http, svc = stack_http, services_of(stack_app)
    if not svc.users.exists(OPERATOR[0]):
        svc.users.add(*OPERATOR)
    assert sign_in(http).status_code == 302
    fine = submit_batch(http, roles[Role.SUBMITTER], [{"prompt": "fine"}])["batch"]["id"]
    batch_when(http, roles[Role.VIEWER], fine, lambda d: d["status"] == "done")
    assert 'id="retry-form"' not in http.get(f"/batches/{fine}").text  # nothing to retry
    bid = _ended(http, roles)
    page = http.get(f"/batches/{bid}").text
    assert 'id="retry-form"' in page and 'value="expired" checked' in page
    retry = f"/batches/{bid}/retry"
    assert http.post(retry, data={"status": "failed"}).status_code == 403  # no CSRF token
    answered = http.post(
        retry, data={"status": "failed", "csrf_token": form_csrf(page)}, follow_redirects=True
    )
    assert "Retrying 1 items as new attempts." in answered.text
    batch_when(http, roles[Role.VIEWER], bid, lambda d: d["status"] == "done")
    after = http.get(f"/batches/{bid}").text
    assert after.count('class="muted attempts">attempt 2</span>') == 1
    bad = http.post(
        retry, data={"status": "nope", "csrf_token": form_csrf(after)}, follow_redirects=True
    )
    assert "Tick statuses from the list" in bad.text


def test_the_page_retries_the_items_ticked_and_the_api_by_tool_or_id(
    stack_http: FlaskClient, stack_app: Flask, roles: dict[Role, dict[str, str]]
) -> None:
    http, svc = stack_http, services_of(stack_app)
    if not svc.users.exists(OPERATOR[0]):
        svc.users.add(*OPERATOR)
    assert sign_in(http).status_code == 302
    items = [{"id": f"f{n}", "prompt": f"please #fail {n}"} for n in range(3)]
    bid = str(submit_batch(http, roles[Role.SUBMITTER], items)["batch"]["id"])
    batch_when(http, roles[Role.VIEWER], bid, lambda d: d["status"] == "done")
    page = http.get(f"/batches/{bid}").text
    assert page.count('name="item" value="f') == 3 and 'form="retry-form"' in page
    ticked = http.post(
        f"/batches/{bid}/retry",
        data={"csrf_token": form_csrf(page), "item": ["f1"]},
        follow_redirects=True,
    )
    assert "Retrying 1 items as new attempts." in ticked.text
    batch_when(http, roles[Role.VIEWER], bid, lambda d: d["status"] == "done")
    found = _results(http, roles[Role.VIEWER], bid)
    assert [(r["id"], r["attempts"]) for r in found] == [("f0", 1), ("f1", 2), ("f2", 1)]
    bad_tool = http.post(
        f"/batches/{bid}/retry",
        data={"csrf_token": form_csrf(page), "tool": "<b>x</b>"},
        follow_redirects=True,
    )
    assert "a tool is a tool&#39;s name" in bad_tool.text and "<b>x</b>" not in bad_tool.text

    url, mine = f"/api/v1/batches/{bid}/retry", roles[Role.SUBMITTER]
    by_tool = http.post(url, json={"tool": "calculator"}, headers=mine)
    assert by_tool.status_code == 202 and by_tool.json["retried"] == 0  # failed: no calls read
    assert http.post(url, json={"tool": "no tool"}, headers=mine).status_code == 422
    assert http.post(url, json={"items": []}, headers=mine).status_code == 422
    by_id = http.post(url, json={"items": ["f2", "nope"]}, headers=mine)
    assert by_id.status_code == 202 and by_id.json["retried"] == 1
