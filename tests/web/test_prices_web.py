"""/api/v1/prices (operators write, every role reads) and the usage page's costs and prices."""

from __future__ import annotations

import csv
import io
import time
from dataclasses import replace

from flask.testing import FlaskClient

from shared.models.batches import BatchConfig, BatchState, BatchStatus
from shared.models.steps import UsageMetadata
from shared.store.batches import BatchInfo
from webui.services import Services


def test_operators_set_and_unset_prices_and_every_role_reads_them(
    http: FlaskClient,
    operator: dict[str, str],
    submitter: dict[str, str],
    viewer: dict[str, str],
) -> None:
    url = "/api/v1/prices/ollama/library/llama3:8b"
    body = {"input_per_mtok": 0.25, "output_per_mtok": 1.25}
    assert http.put(url, json=body, headers=submitter).status_code == 403
    put = http.put(url, json=body, headers=operator)
    assert put.status_code == 200, put.text
    assert (put.json["provider"], put.json["model"]) == ("ollama", "library/llama3:8b")
    listed = http.get("/api/v1/prices", headers=viewer).json["items"]
    assert [(p["model"], p["output_per_mtok"]) for p in listed] == [("library/llama3:8b", 1.25)]
    negative = http.put(url, json={**body, "input_per_mtok": -1}, headers=operator)
    assert negative.status_code == 422 and "input_per_mtok" in negative.text
    extra = http.put(url, json={**body, "currency": "eur"}, headers=operator)
    assert extra.status_code == 422 and "currency" in extra.text
    assert http.delete(url, headers=viewer).status_code == 403
    assert http.delete(url, headers=operator).json["input_per_mtok"] == 0.25
    assert http.get("/api/v1/prices", headers=viewer).json["items"] == []
    assert http.delete(url, headers=operator).status_code == 404


def test_usage_page_and_api_show_cost_and_no_price(
    signed_in: FlaskClient, svc: Services, operator: dict[str, str]
) -> None:
    day = time.strftime("%Y-%m-%d", time.gmtime())
    key = svc.keys.usage_by_day(day, 0)
    priced = UsageMetadata(total_token_count=100, cost_micros=1_500_000)
    unpriced = UsageMetadata(total_token_count=40, unpriced_calls=2)
    for name, usage in (("gpt-x", priced), ("local:1b", unpriced), ("@agent:triage", priced)):
        for counter, value in usage.model_dump().items():
            if value:
                svc.redis.hset(key, f"{name}:{counter}", value)
    signed_in.put(
        "/api/v1/prices/openai/gpt-x",
        json={"input_per_mtok": 1, "output_per_mtok": 2},
        headers=operator,
    )
    html = signed_in.get("/usage").text
    assert (
        '<tr data-model="gpt-x">' in html and '<td class="cost" data-label="Cost">1.5</td>' in html
    )
    row = html[html.index('<tr data-model="local:1b">') :]
    assert '<td class="cost" data-label="Cost">no price</td>' in row[: row.index("</tr>")]
    assert '<tr data-scope="agent:triage">' in html
    assert "openai/gpt-x" in html
    report = signed_in.get(f"/api/v1/usage?start={day}&end={day}", headers=operator).json
    assert report["totals"]["gpt-x"]["cost_micros"] == 1_500_000
    assert report["totals"]["local:1b"]["unpriced_calls"] == 2
    assert report["scope_totals"]["agent:triage"]["cost_micros"] == 1_500_000
    assert "@agent:triage" not in report["totals"]


def test_usage_csv_breaks_tokens_and_cost_down_by_day_model_agent_and_owner(
    signed_in: FlaskClient, svc: Services
) -> None:
    day = time.strftime("%Y-%m-%d", time.gmtime())
    key = svc.keys.usage_by_day(day, 0)
    svc.redis.hset(key, mapping={"gpt-x:total_token_count": 100, "gpt-x:cost_micros": 2_500})
    svc.redis.hset(key, mapping={"local:total_token_count": 7, "local:unpriced_calls": 1})
    svc.redis.hset(key, mapping={"@owner:=cmd|x:total_token_count": 107})
    svc.redis.hset(key, "@owner:=cmd|x:cost_micros", 2_500)
    answer = signed_in.get(f"/usage.csv?start={day}&end={day}")
    assert answer.status_code == 200 and answer.mimetype == "text/csv"
    assert "attachment" in answer.headers["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(answer.text)))
    assert rows[0][:3] == ["day", "kind", "name"] and rows[0][-1] == "cost"
    by_name = {row[2]: row for row in rows[1:]}
    assert by_name["gpt-x"][1] == "model" and by_name["gpt-x"][-1] == "0.002500"
    assert by_name["gpt-x"][rows[0].index("total_token_count")] == "100"
    assert by_name["local"][-1] == ""  # no price: no made-up cost
    assert by_name["'=cmd|x"][1] == "owner"  # a formula is shown as text
    assert 'id="usage-csv"' in signed_in.get("/usage").text


def test_a_batch_projects_the_cost_of_its_rest_from_the_items_that_ran() -> None:
    counts = {state: 0 for state in BatchState}
    counts |= {
        BatchState.DONE: 3,
        BatchState.FAILED: 1,
        BatchState.QUEUED: 6,
        BatchState.RUNNING: 2,
    }
    info = BatchInfo(
        batch_id="b",
        status=BatchStatus.RUNNING,
        total=12,
        counts=counts,
        usage=UsageMetadata(cost_micros=4_000),
        config=BatchConfig(),
        created_at=0.0,
    )
    assert info.rest_cost_micros == 8_000  # 1,000 per item that ran, 8 to go
    assert replace(info, usage=UsageMetadata(unpriced_calls=4)).rest_cost_micros is None


def _seed(svc: Services, day: str, name: str, total: int, cost_micros: int) -> None:
    """One name's counters in a day's usage hash, as the worker's flush writes them."""
    key = svc.keys.usage_by_day(day, 0)
    svc.redis.hset(key, mapping={f"{name}:total_token_count": total})
    svc.redis.hset(key, mapping={f"{name}:cost_micros": cost_micros})


def test_usage_breaks_down_by_day_model_agent_batch_and_owner(
    signed_in: FlaskClient, svc: Services, viewer: dict[str, str]
) -> None:
    today = time.strftime("%Y-%m-%d", time.gmtime())
    yesterday = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 86_400))
    # yesterday: a batch's 2 calls on two models; today: one chat of an agent, one batch call
    _seed(svc, yesterday, "gpt-x", 100, 1_000)
    _seed(svc, yesterday, "local:1b", 50, 500)
    _seed(svc, yesterday, "@batch:-b1", 150, 1_500)
    _seed(svc, yesterday, "@owner:erin", 150, 1_500)
    _seed(svc, today, "gpt-x", 70, 700)
    _seed(svc, today, "@agent:triage", 30, 300)
    _seed(svc, today, "@batch:-b1", 40, 400)
    _seed(svc, today, "@owner:erin", 40, 400)
    _seed(svc, today, "@owner:dora", 30, 300)

    report = signed_in.get(f"/api/v1/usage?start={yesterday}&end={today}", headers=viewer).json
    assert {d: u["total_token_count"] for d, u in report["day_totals"].items()} == {
        yesterday: 150,
        today: 70,
    }
    assert report["day_totals"][yesterday]["cost_micros"] == 1_500
    scopes = {n: u["cost_micros"] for n, u in report["scope_totals"].items()}
    assert scopes == {
        "agent:triage": 300,
        "batch:-b1": 1_900,
        "owner:dora": 300,
        "owner:erin": 1_900,
    }
    assert report["totals"]["gpt-x"]["total_token_count"] == 170

    html = signed_in.get(f"/usage?start={yesterday}&end={today}").text
    batches = html[html.index('id="usage-batch"') :]
    row = batches[batches.index('<tr data-scope="batch:-b1">') :]
    row = row[: row.index("</tr>")]
    assert (
        'href="/batches/-b1"' in row
        and "190" in row
        and '<td class="cost" data-label="Cost">0.0019</td>' in row
    )
    assert (
        f'<tr data-day="{yesterday}"><td>{yesterday}</td><td data-label="Total tokens">150</td>'
        in html
    )
    owners = html[html.index('id="usage-owner"') :]
    assert '<tr data-scope="owner:erin">' in owners and '<tr data-scope="owner:dora">' in owners
    assert '<tr data-scope="agent:triage">' in html[html.index('id="usage-agent"') :]

    rows = list(
        csv.reader(io.StringIO(signed_in.get(f"/usage.csv?start={yesterday}&end={today}").text))
    )
    kinds = {(row[0], row[1], row[2]): row for row in rows[1:]}
    assert kinds[(yesterday, "day", yesterday)][-1] == "0.001500"
    assert kinds[(today, "batch", "'-b1")][rows[0].index("total_token_count")] == "40"
    assert "-b1" not in {row[2] for row in rows}  # a cell starting with - is neutralised
    assert {row[1] for row in rows[1:]} == {"day", "model", "agent", "batch", "owner"}


def test_the_batch_page_shows_its_cost_so_far_and_the_rest_projected(
    signed_in: FlaskClient, svc: Services
) -> None:
    bid = svc.stores.batches.create(BatchConfig())
    meta = svc.keys.batch(bid)
    counts = {"done": 3, "failed": 1, "queued": 6, "running": 2}
    svc.redis.hset(meta, mapping={f"count:{state}": n for state, n in counts.items()})
    svc.redis.hset(meta, mapping={"total": 12, "usage:cost_micros": 4_000})
    html = signed_in.get(f"/batches/{bid}").text
    assert '<span id="batch-cost">0.004</span>' in html
    assert '<span id="batch-rest-cost">0.008000</span> more for the rest' in html
    svc.redis.hset(meta, mapping={"count:queued": 0, "count:running": 0, "count:done": 11})
    assert "more for the rest" not in signed_in.get(f"/batches/{bid}").text  # nothing left
