"""Batches submitted through the API as CSV with a template of columns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.models.users import Role
from tests.web.conftest import batch_when
from webui.services import Services

CSV = 'id,subject,body\nt1,Printer,"on fire, really"\n,Mouse,lost\nt1,Dup,again\n'
TEMPLATE = "Classify: {subject}\n{body}"


def _post(http: FlaskClient, headers: dict[str, str], **body: Any) -> Any:
    return http.post("/api/v1/batches", json=body, headers=headers)


def test_csv_rows_are_items_with_their_lines_and_rendered_prompts(
    http: FlaskClient, submitter: dict[str, str], svc: Services
) -> None:
    response = _post(http, submitter, csv=CSV, template=TEMPLATE)
    assert response.status_code == 201, response.text
    created = response.json
    assert (created["submitted"], created["batch"]["total"]) == (2, 3)
    assert created["invalid"] == [
        {"index": 4, "id": "line-4", "error": "line 4: duplicate id 't1'"}
    ]
    bid = created["batch"]["id"]
    items = [json.loads(raw) for raw in svc.redis.lrange(svc.keys.batch_items(bid), 0, -1)]
    assert [(i["line"], i["id"]) for i in items] == [(2, "t1"), (3, "line-3"), (4, "line-4")]
    prompts = [
        svc.batches.conversations.turn(i["conversation_id"], i["turn_id"]).prompt.text
        for i in items[:2]
    ]
    assert prompts == ["Classify: Printer\non fire, really", "Classify: Mouse\nlost"]


def test_a_prompt_column_needs_no_template(http: FlaskClient, submitter: dict[str, str]) -> None:
    response = _post(http, submitter, csv="prompt\nhello\n")
    assert response.status_code == 201 and response.json["submitted"] == 1


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"csv": CSV.replace("body", "text", 1), "template": TEMPLATE},
         "csv: line 1: no column 'body', which the template names"),
        ({"csv": "subject,body\nPrinter\n", "template": TEMPLATE},
         "line 2: no value for column 'body' (1 cells; the header has 2)"),
        ({"csv": "subject,body\na,b,c\n", "template": TEMPLATE}, "line 2: 3 cells"),
        ({"csv": "subject,body\na,b\n", "template": "{subject.upper}"},
         "no attribute or index access"),
        ({"csv": "subject,body\na,b\n", "template": "{body[0]}"}, "no attribute or index access"),
        ({"csv": "subject,body\na,b\n"}, "no 'prompt' column and no template"),
        ({"csv": "subject\na\n", "items": [{"prompt": "x"}]}, "give items or csv, exactly one"),
        ({"items": [{"prompt": "x"}], "template": "{a}"}, "template names csv columns"),
        ({}, "give items or csv, exactly one"),
    ],
)  # fmt: skip
def test_a_wrong_csv_or_template_creates_nothing(
    http: FlaskClient, submitter: dict[str, str], body: dict[str, Any], says: str
) -> None:
    response = _post(http, submitter, **body)
    assert response.status_code == 422, response.text
    assert says in response.json["error"]["message"]
    assert http.get("/api/v1/batches", headers=submitter).json["items"] == []


def test_the_document_says_items_or_csv(http: FlaskClient, viewer: dict[str, str]) -> None:
    document = http.get("/api/v1/openapi.json", headers=viewer).json
    body = document["components"]["schemas"]["NewBatch"]
    assert [branch["required"] for branch in body["oneOf"]] == [["items"], ["csv"]]
    assert {"csv", "template", "items"} <= set(body["properties"])


@pytest.fixture
def stack_http(stack_app: Flask) -> FlaskClient:
    return stack_app.test_client()


def test_a_csv_batch_runs(stack_http: FlaskClient, roles: dict[Role, dict[str, str]]) -> None:
    response = _post(stack_http, roles[Role.SUBMITTER], csv=CSV, template=TEMPLATE)
    bid = response.json["batch"]["id"]
    done = batch_when(stack_http, roles[Role.VIEWER], bid, lambda d: d["status"] == "done")
    assert done["counts"]["done"] == 2 and done["counts"]["invalid"] == 1
    lines = stack_http.get(f"/api/v1/batches/{bid}/results", headers=roles[Role.VIEWER]).text
    results = [json.loads(line) for line in lines.splitlines()]
    assert 'You said: "Classify: Printer on fire, really"' in results[0]["text"]
