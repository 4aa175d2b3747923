"""Bodies a fuzzer found answering 500: each is now a 4xx that names its field."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from shared.models.config import ToolPolicy
from shared.store.policy import ToolInfo
from webui.services import Services


def _refused(response: Any, status: int, field: str) -> None:
    assert response.status_code == status, response.text
    assert field in response.text, response.text


@pytest.mark.parametrize("url", [{"a": 1}, 5, ["https://x.test/"], None, True])
def test_a_webhook_url_that_is_not_a_string_is_a_422(
    http: FlaskClient, operator: dict[str, str], url: Any
) -> None:
    body = {"url": url, "events": ["approval.needed"]}
    answer = http.post("/api/v1/webhooks/endpoints", json=body, headers=operator)
    _refused(answer, 422, "url")


@pytest.mark.parametrize("age", [1e300, 10 * 366 * 86_400 + 1])
def test_a_bulk_filter_older_than_anything_is_a_422(
    http: FlaskClient, operator: dict[str, str], age: float
) -> None:
    body = {"filter": {"min_age_s": age}, "resolution": {"kind": "allow"}, "expected_count": 0}
    answer = http.post("/api/v1/notifications/bulk-resolve", json=body, headers=operator)
    _refused(answer, 422, "min_age_s")


def test_a_conversation_may_name_both_an_agent_and_its_id(
    http: FlaskClient, svc: Services, operator: dict[str, str]
) -> None:
    svc.policies.publish_catalog([ToolInfo(name="calculator", default_policy=ToolPolicy.AUTO)])
    agent = {"name": "triage", "system_prompt": "Sort it.", "tools": {"calculator": "auto"}}
    assert http.post("/api/v1/agents", json=agent, headers=operator).status_code == 201
    body = {"agent": "triage", "conversation_id": "triage-1"}
    created = http.post("/api/v1/conversations", json=body, headers=operator)
    assert created.status_code == 201, created.text
    assert created.json["id"] == "triage-1" and created.json["config"]["agent"] == "triage"
    fixed = {**body, "conversation_id": "triage-2", "system_prompt": "Other."}
    _refused(http.post("/api/v1/conversations", json=fixed, headers=operator), 422, "system_prompt")


def test_a_webhook_host_with_a_label_too_long_to_resolve_is_no_500(
    http: FlaskClient, operator: dict[str, str]
) -> None:
    """The outbound check resolves the host: an IDNA label over 63 characters cannot be; a URL
    no client can parse (a stray bracket, a port that is no number or too big) is a 422."""
    body = {"url": f"https://{'0' * 100}.example/hook", "events": ["approval.needed"]}
    answer = http.post("/api/v1/webhooks/endpoints", json=body, headers=operator)
    assert answer.status_code == 201, answer.text  # nothing to resolve: let through
    for url in ("http://]$VFri)", "http://Mi:9wQ8", "http://h:70000/", "http://[::g]/"):
        body = {"url": url, "events": ["approval.needed"]}
        answer = http.post("/api/v1/webhooks/endpoints", json=body, headers=operator)
        assert answer.status_code == 422 and "url" in answer.text, answer.text
