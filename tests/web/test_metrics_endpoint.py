"""`/metrics` of the web: who may read it, and the gauges it reads from Redis."""

from __future__ import annotations

import time

import pytest
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from shared.client.broker import uses_outbox
from shared.models.budgets import BudgetKind, BudgetSpec
from shared.models.notifications import Notification, NotificationKind, ResolutionKind
from shared.models.steps import ToolCall
from shared.models.users import Role
from shared.store.budgets import BudgetStore, today
from shared.store.inbox_index import index_commands
from tests.web.conftest import AppFactory, bearer, services_of

TOKEN = "scrape-me-0123456789"


@pytest.fixture
def http(make_app: AppFactory) -> FlaskClient:
    return make_app(metrics_token=TOKEN).test_client()


def gauges(http: FlaskClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = http.get("/metrics", headers=bearer(TOKEN))
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_metrics_need_the_token_or_an_operator(http: FlaskClient) -> None:
    svc = services_of(http.application)
    tokens = {role: svc.tokens.create(f"{role.value} token", role) for role in Role}
    assert http.get("/metrics").status_code == 401
    assert http.get("/metrics").json["error"]["code"] == "unauthorized"  # never a redirect
    assert http.get("/metrics", headers=bearer("nope")).status_code == 401
    assert http.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    assert http.get("/metrics", headers=bearer(tokens[Role.VIEWER])).status_code == 403
    assert http.get("/metrics", headers=bearer(tokens[Role.OPERATOR])).status_code == 200
    assert http.get("/metrics", headers=bearer(TOKEN)).status_code == 200


def test_without_a_metrics_token_only_operators_read_them(make_app: AppFactory) -> None:
    http = make_app().test_client()
    assert http.get("/metrics", headers=bearer("")).status_code == 401
    assert http.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401


def _file(http: FlaskClient, tool: str, age_s: float) -> None:
    """A pending request in the inbox's indexes, as a park files it."""
    svc = services_of(http.application)
    now = time.time() - age_s
    note = Notification(
        id=f"c{tool}0000000000000000.x1",
        conversation_id=f"c{tool}0000000000000000",
        turn_id="t1",
        kind=NotificationKind.INTERACTION,
        tool_call=ToolCall(name=tool, args={}),
        title="Allow?",
        allowed=[ResolutionKind.ALLOW, ResolutionKind.DENY],
        created_at=now,
    )
    for key, members in index_commands(svc.keys, note):
        svc.redis.zadd(key, members)


def test_pending_gauges_count_the_inbox_by_tool(http: FlaskClient) -> None:
    svc = services_of(http.application)
    svc.redis.hset(svc.keys.tool_catalog(), "send_email", "{}")
    before = gauges(http)
    assert before[("signoff_approvals_pending", (("tool", "send_email"),))] == 0
    assert before[("signoff_approvals_oldest_pending_age_seconds", ())] == 0
    _file(http, "send_email", age_s=120)
    _file(http, "undescribed", age_s=5)
    after = gauges(http)
    assert after[("signoff_approvals_pending", (("tool", "send_email"),))] == 1
    assert after[("signoff_approvals_pending", (("tool", "other"),))] == 1
    assert 119 < after[("signoff_approvals_oldest_pending_age_seconds", ())] < 200
    # what waits for the broker: its queue, or with a broker apart the task outbox
    queue = "outbox" if uses_outbox(svc.settings) else "turns"
    assert after[("signoff_queue_depth", (("queue", queue),))] == 0
    assert after[("signoff_redis_up", ())] == 1


def test_agent_budgets_say_how_much_of_today_is_used(http: FlaskClient) -> None:
    svc = services_of(http.application)
    svc.redis.hset(svc.keys.agents(), mapping={"triage": "1", "unlimited": "1"})
    BudgetStore(svc.redis, svc.keys).set(BudgetKind.AGENT, "triage", BudgetSpec(tokens=1000))
    day = svc.keys.budget_day("agent", "triage", today())
    svc.redis.hset(day, mapping={"spent:tokens": 850, "reserved:tokens": 50})
    found = gauges(http)
    assert (
        found[("signoff_agent_budget_used_ratio", (("agent", "triage"), ("unit", "tokens")))] == 0.9
    )
    assert not [key for key in found if ("agent", "unlimited") in key[1]]
