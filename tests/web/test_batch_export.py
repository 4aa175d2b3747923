"""A batch's results downloaded as CSV or JSON lines, from the API and the batch page."""

from __future__ import annotations

import csv
import io
import json
import tracemalloc
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.models.batches import BatchConfig, BatchState
from shared.models.config import ConversationConfig
from shared.models.content import Content
from shared.models.users import Role
from shared.store.batches import BatchLine
from tests.web.conftest import batch_when, submit_batch
from webui.services import Services

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string"},
        "score": {"type": "integer"},
        "meta": {"type": "object", "properties": {"lang": {"type": "string"}}},
    },
    "required": ["label", "score", "meta"],
}
# Item ids a spreadsheet would run as formulas, were they written as they are.
HOSTILE = ['=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(A1)"]


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_routes_refuse_a_bad_format_and_an_unknown_batch(
    http: FlaskClient, viewer: dict[str, str]
) -> None:
    assert http.get("/api/v1/batches/b1/results?format=csv").status_code == 401
    missing = http.get("/api/v1/batches/nope/results?format=csv", headers=viewer)
    assert missing.status_code == 404 and missing.mimetype == "application/json"
    bad = http.get("/api/v1/batches/nope/results?format=xlsx", headers=viewer)
    assert bad.status_code == 400 and "format" in bad.json["error"]["message"]


def test_the_document_says_the_results_come_as_csv_too(
    http: FlaskClient, viewer: dict[str, str]
) -> None:
    document = http.get("/api/v1/openapi.json", headers=viewer).json
    results = document["paths"]["/api/v1/batches/{bid}/results"]["get"]
    assert set(results["responses"]["200"]["content"]) == {"application/x-ndjson", "text/csv"}
    assert [p["name"] for p in results["parameters"]] == ["bid", "format"]


@pytest.fixture
def stack_http(stack_app: Flask) -> FlaskClient:
    return stack_app.test_client()


def test_a_run_batch_exports_as_csv_and_jsonl_for_every_role(
    stack_http: FlaskClient, roles: dict[Role, dict[str, str]]
) -> None:
    http = stack_http
    items: list[Any] = [
        {"id": item_id, "prompt": f"classify {n}"} for n, item_id in enumerate(HOSTILE)
    ]
    items += [{"id": "boom", "prompt": "please #fail"}, {"id": "bad"}]
    config = {"conversation": {"response_schema": SCHEMA}}
    bid = submit_batch(http, roles[Role.SUBMITTER], items, config=config)["batch"]["id"]
    done = batch_when(http, roles[Role.VIEWER], bid, lambda d: d["status"] == "done")
    url = f"/api/v1/batches/{bid}/results"
    for role in Role:
        response = http.get(f"{url}?format=csv", headers=roles[role])
        assert response.status_code == 200, role
        assert response.is_streamed and response.mimetype == "text/csv"
        assert response.headers["Content-Disposition"] == (
            f'attachment; filename="batch-{bid}.csv"'
        )
    rows = _csv(response.text)
    assert list(rows[0])[:9] == [
        "id",
        "line",
        "status",
        "attempts",
        "answer",
        "structured.label",
        "structured.meta.lang",
        "structured.score",
        "structured_other",
    ]  # the stored schema's keys are sorted
    assert [r["id"] for r in rows] == ["'" + i for i in HOSTILE] + ["boom", "bad"]
    assert [r["status"] for r in rows] == ["done"] * 4 + ["failed", "invalid"]
    first = rows[0]
    assert first["structured.label"].startswith("[demo model]") and first["structured.score"]
    assert int(first["tokens"]) > 0 and first["denied"] == "0" and first["error"] == ""
    assert rows[4]["error"] == "model call failed: scripted failure requested"
    assert "missing 'prompt'" in rows[5]["error"]
    tokens = sum(int(r["tokens"]) for r in rows if r["tokens"])
    assert tokens == done["usage"]["total_token_count"]
    jsonl = http.get(f"{url}?format=jsonl", headers=roles[Role.VIEWER])
    assert jsonl.mimetype == "application/x-ndjson"
    assert jsonl.headers["Content-Disposition"] == f'attachment; filename="batch-{bid}.jsonl"'
    lines = [json.loads(line) for line in jsonl.text.splitlines()]
    assert [line["id"] for line in lines] == [*HOSTILE, "boom", "bad"]  # JSON needs no guard
    assert lines[0]["structured_output"]["label"] == first["structured.label"]
    plain = http.get(url, headers=roles[Role.VIEWER])  # as before: no download header
    assert plain.text == jsonl.text and "Content-Disposition" not in plain.headers


def test_the_batch_page_links_both_downloads(
    stack_http: FlaskClient, stack_app: Flask, roles: dict[Role, dict[str, str]]
) -> None:
    from tests.web.conftest import OPERATOR, services_of, sign_in

    svc = services_of(stack_app)
    if not svc.users.exists(OPERATOR[0]):
        svc.users.add(*OPERATOR)
    assert sign_in(stack_http).status_code == 302
    bid = submit_batch(stack_http, roles[Role.SUBMITTER], [{"prompt": "hi"}])["batch"]["id"]
    page = stack_http.get(f"/batches/{bid}").text
    csv_link = f'href="/api/v1/batches/{bid}/results?format=csv"'
    assert csv_link in page and f'href="/api/v1/batches/{bid}/results?format=jsonl"' in page
    download = stack_http.get(f"/api/v1/batches/{bid}/results?format=csv")  # the session's
    assert download.status_code == 200
    assert download.text.startswith("id,line,status,attempts,answer")


# Bounded memory: a batch whose results are far larger than one chunk of them.

ITEMS = 5_000
ANSWER = "word " * 800  # 4 KB an item: 20 MB of CSV in all


def _answered_batch(svc: Services) -> str:
    """A batch of ITEMS items, each with a turn answered as the worker's flush records it."""
    store = svc.batches
    bid = store.create(BatchConfig(conversation=ConversationConfig(), max_concurrency=1))
    store.submit(bid, (BatchLine(n, f"i{n}", Content.from_text(f"p{n}")) for n in range(ITEMS)))
    usage = {"total_token_count": 800, "cost_micros": 0, "unpriced_calls": 1}
    with svc.redis.pipeline(transaction=False) as pipe:
        for n, raw in enumerate(svc.redis.lrange(svc.keys.batch_items(bid), 0, -1)):
            item = json.loads(raw)
            response = {
                "text": f"{n} {ANSWER}",
                "structured_output": None,
                "steps": [],
                "usage_metadata": usage,
            }
            pipe.hset(
                svc.keys.turn(item["conversation_id"], item["turn_id"]),
                "response",
                json.dumps(response),
            )
            pipe.hset(svc.keys.batch_states(bid), item["conversation_id"], BatchState.DONE.value)
        pipe.execute()
    return bid


def test_a_large_export_streams_in_bounded_memory(
    http: FlaskClient, svc: Services, viewer: dict[str, str]
) -> None:
    bid = _answered_batch(svc)
    response = http.get(f"/api/v1/batches/{bid}/results?format=csv", headers=viewer, buffered=False)
    sent = rows = 0
    early = 0  # the peak while the first tenth of the rows was sent
    tracemalloc.start()
    try:
        for piece in response.iter_encoded():
            sent += len(piece)
            rows += piece.count(b"\r\n")
            if not early and rows >= ITEMS // 10:
                early = tracemalloc.get_traced_memory()[1]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        response.close()
    assert rows == ITEMS + 1 and sent > 20_000_000
    print(
        f"exported {sent / 1e6:.1f} MB of CSV; peak memory {early / 1e6:.1f} MB over the "
        f"first tenth, {peak / 1e6:.1f} MB over all"
    )
    assert peak < 1.3 * early  # it does not grow with the rows sent
    assert peak < sent / 3  # a chunk of results at a time, not the whole export
