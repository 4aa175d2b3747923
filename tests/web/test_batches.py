"""Batches over the API and the pages: submit, report bad items, follow, cancel, results."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.models.users import Role
from tests.web.conftest import (
    OPERATOR,
    batch_when,
    form_csrf,
    services_of,
    sign_in,
    submit_batch,
    wait_for,
)

ROUTES = [
    ("POST", "/api/v1/batches"),
    ("GET", "/api/v1/batches"),
    ("GET", "/api/v1/batches/b1"),
    ("POST", "/api/v1/batches/b1/cancel"),
    ("GET", "/api/v1/batches/b1/results"),
]
ASK = {"conversation": {"tools": {"calculator": "ask"}}}


def _finished(detail: dict[str, Any]) -> bool:
    return bool(detail["status"] == "done")


def _results(http: FlaskClient, headers: dict[str, str], bid: str) -> list[dict[str, Any]]:
    response = http.get(f"/api/v1/batches/{bid}/results", headers=headers)
    assert response.status_code == 200
    assert response.mimetype == "application/x-ndjson" and response.is_streamed
    return [json.loads(line) for line in response.text.splitlines()]


# Without a worker: roles, validation, listing, the results pager.


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_batch_routes_need_a_token(http: FlaskClient, method: str, path: str) -> None:
    response = http.open(path, method=method, json={})
    assert response.status_code == 401
    assert response.json["error"]["code"] == "unauthorized"


def test_batch_roles_and_unknown_batches(
    http: FlaskClient, viewer: dict[str, str], submitter: dict[str, str]
) -> None:
    body = {"items": [{"prompt": "hi"}]}
    refused = http.post("/api/v1/batches", json=body, headers=viewer)
    assert refused.status_code == 403 and "submitter role" in refused.json["error"]["message"]
    bid = submit_batch(http, submitter, body["items"])["batch"]["id"]
    assert http.post(f"/api/v1/batches/{bid}/cancel", headers=viewer).status_code == 403
    assert http.get(f"/api/v1/batches/{bid}", headers=viewer).json["status"] == "running"
    for method, path in ROUTES[2:]:
        missing = http.open(path.replace("b1", "nope"), method=method, headers=submitter)
        assert missing.status_code == 404, path
        assert missing.json["error"]["message"] == "batch nope does not exist"


@pytest.mark.parametrize(
    ("body", "status", "where"),
    [
        ({}, 422, "items"),
        ({"items": []}, 422, "items"),
        ({"items": [{"prompt": "x"}], "config": {"max_concurrency": 0}}, 422, "max_concurrency"),
        ({"items": [{"prompt": "x"}], "config": {"conversation": {"bogus": 1}}}, 422, "bogus"),
        (
            {"items": [{"prompt": "x"}], "config": {"conversation": {"provider": " "}}},
            422,
            "provider",
        ),
        (
            {
                "items": [{"prompt": "x"}],
                "config": {"conversation": {"response_schema": {"type": 5}}},
            },
            422,
            "response_schema",
        ),
        ({"items": [{"prompt": "x"}], "batch_id": "not/an id"}, 422, "batch_id"),
    ],
)
def test_batch_bodies_are_validated(
    http: FlaskClient, submitter: dict[str, str], body: dict[str, Any], status: int, where: str
) -> None:
    response = http.post("/api/v1/batches", json=body, headers=submitter)
    assert response.status_code == status, response.text
    assert where in response.json["error"]["message"]
    assert http.get("/api/v1/batches", headers=submitter).json["items"] == []  # nothing created


def test_a_batch_body_must_be_json(http: FlaskClient, submitter: dict[str, str]) -> None:
    headers = {**submitter, "Content-Type": "application/json"}
    response = http.post("/api/v1/batches", data=b'{"items": [', headers=headers)
    assert response.status_code == 400 and response.json["error"]["code"] == "malformed_json"


def test_batches_list_newest_first_a_page_at_a_time(
    http: FlaskClient, submitter: dict[str, str]
) -> None:
    ids = [submit_batch(http, submitter, [{"prompt": "hi"}])["batch"]["id"] for _ in range(3)]
    first = http.get("/api/v1/batches?limit=2", headers=submitter).json
    assert [b["id"] for b in first["items"]] == ids[::-1][:2]
    assert first["next_offset"] == 2
    rest = http.get("/api/v1/batches?limit=2&offset=2", headers=submitter).json
    assert [b["id"] for b in rest["items"]] == [ids[0]] and rest["next_offset"] is None
    assert rest["items"][0]["total"] == 1 and rest["items"][0]["counts"]["running"] == 1
    assert http.get("/api/v1/batches?limit=0", headers=submitter).status_code == 400


def test_batch_page_pages_its_results(
    signed_in: FlaskClient, submitter: dict[str, str], app: Flask
) -> None:
    items = [{"id": f"n{i:02d}", "prompt": f"prompt {i}"} for i in range(55)]
    bid = submit_batch(signed_in, submitter, items)["batch"]["id"]
    first = signed_in.get(f"/batches/{bid}").text
    shown = re.findall(r"<code>(n\d\d)</code>", first)
    assert shown == [f"n{i:02d}" for i in range(50)]
    assert f"/batches/{bid}?offset=50" in first
    second = signed_in.get(f"/batches/{bid}?offset=50").text
    assert re.findall(r"<code>(n\d\d)</code>", second) == [f"n{i:02d}" for i in range(50, 55)]
    listing = signed_in.get("/batches").text
    assert f'href="/batches/{bid}"' in listing and 'aria-label="0 of 55 finished: ' in listing


# With a worker: batches that run.


@pytest.fixture
def stack_http(stack_app: Flask) -> FlaskClient:
    return stack_app.test_client()


def test_bad_items_are_reported_and_the_rest_run_in_input_order(
    stack_http: FlaskClient, roles: dict[Role, dict[str, str]]
) -> None:
    http, submitter = stack_http, roles[Role.SUBMITTER]
    items: list[Any] = [
        {"id": "a", "prompt": "first #long"},
        "not an object",
        {"id": "b"},
        {"id": "c", "prompt": " \x00 "},
        {"id": "a", "prompt": "the same id again"},
        {"prompt": "no id given"},
        {"id": "d", "content": {"parts": [{"kind": "text", "text": "as content"}]}},
    ]
    created = submit_batch(http, submitter, items, config={"max_concurrency": 2})
    assert (created["submitted"], created["skipped"]) == (3, 0)
    assert [(i["index"], i["id"]) for i in created["invalid"]] == [
        (1, "item-1"),
        (2, "b"),
        (3, "c"),
        (4, "item-4"),  # the id its result carries; the message names the duplicate
    ]
    assert "items[4]: duplicate id 'a'" in created["invalid"][3]["error"]
    assert "items[2]: missing 'prompt'" in created["invalid"][1]["error"]
    bid = created["batch"]["id"]
    done = batch_when(http, roles[Role.VIEWER], bid, _finished)
    assert done["total"] == done["finished"] == 7
    assert done["counts"]["done"] == 3 and done["counts"]["invalid"] == 4
    results = _results(http, roles[Role.VIEWER], bid)
    assert [r["id"] for r in results] == ["a", "item-1", "b", "c", "item-4", "item-5", "d"]
    assert [r["line"] for r in results] == list(range(7))
    assert [r["status"] for r in results] == ["done"] + ["invalid"] * 4 + ["done"] * 2
    assert 'You said: "as content"' in results[6]["text"]
    assert len(results[0]["text"].split()) > 150  # the #long answer, whole
    used = sum(r["usage"]["total_token_count"] for r in results if r["usage"])
    assert used == done["usage"]["total_token_count"] > 0
    again = submit_batch(
        http, submitter, [{"id": "a", "prompt": "x"}, {"id": "e", "prompt": "new"}], batch_id=bid
    )
    assert (again["submitted"], again["skipped"], again["batch"]["total"]) == (1, 1, 8)
    batch_when(http, submitter, bid, lambda d: _finished(d) and d["counts"]["done"] == 4)
    assert [r["id"] for r in _results(http, submitter, bid)][-1] == "e"


def test_batch_page_shows_approvals_and_cancels(
    stack_http: FlaskClient, stack_app: Flask, roles: dict[Role, dict[str, str]]
) -> None:
    http = stack_http
    svc = services_of(stack_app)
    if not svc.users.exists(OPERATOR[0]):
        svc.users.add(*OPERATOR)
    assert sign_in(http).status_code == 302
    items = [
        {"id": f"i{n}", "prompt": f'call calculator {{"expression": "{n}+1"}}'} for n in range(3)
    ]
    bid = submit_batch(http, roles[Role.SUBMITTER], items, config=ASK)["batch"]["id"]
    # the batch's counts follow each park (on a cluster, in a step of their own): both caught up
    batch_when(
        http,
        roles[Role.VIEWER],
        bid,
        lambda d: d["pending_approvals"] == 3 and d["counts"]["waiting"] == 3,
    )
    page = http.get(f"/batches/{bid}").text
    assert 'class="batch-progress" value="0" max="3"' in page
    assert '<td data-state="waiting">3</td>' in page
    assert f'href="/approvals?batch_id={bid}"' in page
    assert page.count('<li><a href="/approvals/') == 3  # each titled by what it would run
    assert all(f"calculator expression {n}+1" in page for n in range(3))
    assert 'data-batch-status="running"' in page and 'id="cancel-form"' in page
    inbox = http.get(f"/approvals?batch={bid}").text
    assert 'id="pending-count">3<' in inbox
    cancel = f"/batches/{bid}/cancel"
    assert http.post(cancel).status_code == 403  # no CSRF token
    cancelled = http.post(cancel, data={"csrf_token": form_csrf(page)}, follow_redirects=True)
    assert "Batch cancelled: 3 conversations stopped." in cancelled.text
    final = batch_when(http, roles[Role.VIEWER], bid, lambda d: d["counts"]["cancelled"] == 3)
    assert final["status"] == "cancelled" and final["finished"] == 3
    wait_for(
        lambda: svc.notifications.count_pending(batch_id=bid) == 0, "the notifications cancelled"
    )
    after = http.get(f"/batches/{bid}").text
    assert 'id="cancel-form"' not in after and "status-cancelled" in after


def test_cancel_through_the_api(stack_http: FlaskClient, roles: dict[Role, dict[str, str]]) -> None:
    items = [{"prompt": f'call calculator {{"expression": "{n}"}}'} for n in range(2)]
    bid = submit_batch(stack_http, roles[Role.SUBMITTER], items, config=ASK)["batch"]["id"]
    batch_when(stack_http, roles[Role.VIEWER], bid, lambda d: d["counts"]["waiting"] == 2)
    response = stack_http.post(f"/api/v1/batches/{bid}/cancel", headers=roles[Role.SUBMITTER])
    assert response.status_code == 202
    assert response.json["stopped"] == 2 and response.json["batch"]["status"] == "cancelled"
    batch_when(stack_http, roles[Role.VIEWER], bid, lambda d: d["counts"]["cancelled"] == 2)
    more = stack_http.post(
        "/api/v1/batches",
        json={"items": [{"prompt": "late"}], "batch_id": bid},
        headers=roles[Role.SUBMITTER],
    )
    assert more.status_code == 409 and "was cancelled" in more.json["error"]["message"]
