"""/usage, /openapi.json, and errors when Redis is gone."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.local.embedded_redis import free_port
from shared.models.users import Role
from tests.web.conftest import AppFactory, bearer, services_of
from webui.services import Services


def test_usage_by_model_and_day(http: FlaskClient, viewer: dict[str, str], svc: Services) -> None:
    day = date(2025, 3, 10)
    svc.redis.hset(
        svc.keys.usage_by_day(day.isoformat(), 0),
        mapping={
            "signoff-demo:prompt_token_count": 10,
            "signoff-demo:candidates_token_count": 5,
            "signoff-demo:total_token_count": 15,
            "llama3:8b:total_token_count": 7,
            "llama3:8b:not_a_counter": 99,
        },
    )
    svc.redis.hset(
        svc.keys.usage_by_day((day + timedelta(days=1)).isoformat(), 0),
        mapping={"signoff-demo:total_token_count": 1},
    )
    body = http.get("/api/v1/usage?start=2025-03-09&end=2025-03-11", headers=viewer).json
    assert (body["start"], body["end"]) == ("2025-03-09", "2025-03-11")
    assert [d["day"] for d in body["days"]] == ["2025-03-09", "2025-03-10", "2025-03-11"]
    assert body["days"][0]["models"] == {}
    tenth = body["days"][1]["models"]
    assert tenth["signoff-demo"]["prompt_token_count"] == 10
    assert tenth["signoff-demo"]["total_token_count"] == 15
    assert tenth["llama3:8b"]["total_token_count"] == 7  # a colon in the model name survives
    assert body["totals"]["signoff-demo"]["total_token_count"] == 16
    default = http.get("/api/v1/usage", headers=viewer).json
    assert len(default["days"]) == 14
    assert default["end"] == datetime.now(UTC).date().isoformat()


def test_usage_rejects_a_day_that_is_not_one(http: FlaskClient, viewer: dict[str, str]) -> None:
    response = http.get("/api/v1/usage?start=2025-13-01", headers=viewer)
    assert response.status_code == 400
    assert response.json["error"]["code"] == "bad_parameter"


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        ("start=2025-03-02&end=2025-03-01", None, None),  # end before start
        ("start=0001-01-01&end=0001-01-02", None, None),  # before any usage
        ("start=1999-12-30&end=2000-01-02", "2000-01-01", "2000-01-02"),
        ("start=9999-12-30&end=9999-12-31", None, None),  # after today
        ("end=3882-05-27", None, None),
        ("start=2020-01-01&end=2025-01-01", "2024-01-02", "2025-01-01"),  # its last 366 days
        ("start=2024-01-01&end=2024-12-31", "2024-01-01", "2024-12-31"),
    ],
)
def test_usage_of_any_range_reads_the_days_that_can_hold_usage(
    http: FlaskClient, viewer: dict[str, str], query: str, first: str | None, last: str | None
) -> None:
    """Schema-valid dates are never refused: the answer lists the days it read."""
    response = http.get(f"/api/v1/usage?{query}", headers=viewer)
    assert response.status_code == 200, response.text
    days = [day["day"] for day in response.json["days"]]
    assert (days[0], days[-1]) == (first, last) if first else days == []
    assert len(days) <= 366
    asked = dict(part.split("=") for part in query.split("&"))
    assert response.json["end"] == asked["end"]


def test_usage_up_to_a_future_day_stops_today(http: FlaskClient, viewer: dict[str, str]) -> None:
    today = datetime.now(UTC).date()
    start = (today - timedelta(days=2)).isoformat()
    body = http.get(f"/api/v1/usage?start={start}&end=9999-12-31", headers=viewer).json
    assert [day["day"] for day in body["days"]][-1] == today.isoformat()
    assert (body["start"], body["end"], len(body["days"])) == (start, "9999-12-31", 3)


# Routes a caller authenticates with a signature of the request, not a user's credentials.
SIGNED_BY_THE_SENDER = {
    ("POST", "/api/v1/triggers/{name}"),
    ("POST", "/api/v1/slack/interactions"),
}


def test_openapi_lists_every_route(app: Flask, http: FlaskClient, viewer: dict[str, str]) -> None:
    document = http.get("/api/v1/openapi.json", headers=viewer).json
    assert document["openapi"] == "3.1.0"
    paths = document["paths"]
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/v1"):
            continue
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)
        assert path in paths, path
        for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}:
            operation = paths[path][method.lower()]
            assert operation["responses"], (method, path)
            # no user: its own signature, a 401 without one
            if (method, path) in SIGNED_BY_THE_SENDER:
                assert "x-required-role" not in operation and "401" in operation["responses"]
            else:
                assert operation["x-required-role"] in {r.value for r in Role}
            bodiless = (
                "/abort",
                "/close",
                "/cancel",
                "/disable",
                "/enable",
                "/pause",
                "/resume",
                "/redeliver",
                "/refresh",
                "/secret",
                "/claim",
                "/release",
                "/restore",
            )
            if method == "POST" and not path.endswith(bodiless):
                assert "requestBody" in operation, path
            for status, answer in operation["responses"].items():
                assert answer["content"], (method, path, status)


def test_openapi_schemas_resolve(http: FlaskClient, viewer: dict[str, str]) -> None:
    document = http.get("/api/v1/openapi.json", headers=viewer).json
    text = str(document)
    schemas = document["components"]["schemas"]
    for ref in set(re.findall(r"#/components/schemas/([A-Za-z0-9_-]+)", text)):
        assert ref in schemas, ref
    create = document["paths"]["/api/v1/conversations"]["post"]
    assert create["x-required-role"] == "submitter"
    assert set(create["responses"]) >= {"201", "401", "403", "422"}
    prompts = document["paths"]["/api/v1/conversations/{cid}/prompts"]["post"]
    assert set(prompts["requestBody"]["content"]) == {"application/json", "multipart/form-data"}
    events = document["paths"]["/api/v1/conversations/{cid}/events"]["get"]
    assert "text/event-stream" in events["responses"]["200"]["content"]
    assert "NewConversation" in schemas and "ConversationDetail" in schemas
    results = document["paths"]["/api/v1/batches/{bid}/results"]["get"]
    assert set(results["responses"]["200"]["content"]) == {"application/x-ndjson", "text/csv"}
    assert results["x-required-role"] == "viewer"
    roles = {
        ("/api/v1/batches", "post"): "submitter",
        ("/api/v1/batches/{bid}/cancel", "post"): "submitter",
        ("/api/v1/batches", "get"): "viewer",
        ("/api/v1/notifications/bulk-resolve", "post"): "approver",
        ("/api/v1/audit", "get"): "viewer",
    }
    for (path, method), role in roles.items():
        assert document["paths"][path][method]["x-required-role"] == role, path
    bulk = document["paths"]["/api/v1/notifications/bulk-resolve"]["post"]
    assert {"200", "409", "422"} <= set(bulk["responses"])
    assert {"NewBatch", "BatchSubmitted", "BulkResolveBody", "AuditList"} <= set(schemas)


@pytest.mark.one_redis  # a cluster client reads its nodes at start: the web exits naming them
def test_redis_gone_is_503(make_app: AppFactory, redis_server: object) -> None:
    app = make_app(redis_url=f"redis://127.0.0.1:{free_port()}/0", redis_timeout_s=0.2)
    http = app.test_client()
    health = http.get("/healthz")
    assert health.status_code == 503 and health.json["redis"] is False
    response = http.get("/api/v1/conversations", headers=bearer("so_anything"))
    assert response.status_code == 503
    assert response.json["error"]["code"] == "storage_error"


@pytest.mark.one_redis  # reads one Redis's pool (a cluster client keeps one per node)
def test_threads_wait_for_the_bounded_pool(make_app: AppFactory) -> None:
    """More concurrent requests than Redis connections: they queue, none fails."""
    from concurrent.futures import ThreadPoolExecutor

    app = make_app(web_redis_connections=3)
    svc, http = services_of(app), app.test_client()
    viewer = bearer(svc.tokens.create("v", Role.VIEWER))
    assert svc.redis.connection_pool.max_connections == 3

    def one(_: int) -> int:
        return http.get("/api/v1/conversations", headers=viewer).status_code

    with ThreadPoolExecutor(max_workers=40) as pool:
        statuses = list(pool.map(one, range(200)))
    assert statuses == [200] * 200
    assert len(svc.redis.connection_pool._connections) <= 3  # type: ignore[attr-defined]


@pytest.mark.one_redis  # starves one Redis's pool (a cluster client keeps one per node)
def test_a_starved_pool_answers_503_with_retry_after(make_app: AppFactory) -> None:
    """Every connection held past the wait: the answer says when to come back."""
    app = make_app(web_redis_connections=2, redis_pool_wait_s=0.2)
    svc, http = services_of(app), app.test_client()
    viewer = bearer(svc.tokens.create("v", Role.VIEWER))
    pool = svc.redis.connection_pool
    held = [pool.get_connection(), pool.get_connection()]
    try:
        response = http.get("/api/v1/conversations", headers=viewer)
    finally:
        for connection in held:
            pool.release(connection)
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "1"
    assert response.json["error"]["code"] == "storage_error"
    assert "SIGNOFF_WEB_REDIS_CONNECTIONS" in response.json["error"]["message"]
    assert http.get("/api/v1/conversations", headers=viewer).status_code == 200
