"""/api/v1/agents and /api/v1/schedules: operators write, everyone reads, errors name the problem;
the agents page; a conversation and a batch that name an agent record it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from flask.testing import FlaskClient

from shared.models.config import ToolPolicy
from shared.models.triggers import TriggerRequest
from shared.models.users import Role
from shared.store.policy import ToolInfo
from shared.store.triggers import TriggerStore
from tests.web.conftest import bearer, form_csrf
from webui.services import Services

AGENT = {"name": "triage", "system_prompt": "Sort it.", "tools": {"calculator": "auto"}}
SCHEDULE = {"name": "nightly", "agent": "triage", "prompt": "Report.", "cron": "0 2 * * *"}


@pytest.fixture(autouse=True)
def described_tools(svc: Services) -> None:
    svc.policies.publish_catalog(
        [
            ToolInfo(name="calculator", default_policy=ToolPolicy.AUTO),
            ToolInfo(name="send_email", default_policy=ToolPolicy.ASK),
        ]
    )


def _error(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    return str(response.json["error"]["message"])


WRITES = [
    ("POST", "/api/v1/agents", AGENT),
    ("PUT", "/api/v1/agents/triage", {"system_prompt": "x"}),
    ("DELETE", "/api/v1/agents/triage", None),
    ("POST", "/api/v1/schedules", SCHEDULE),
    ("POST", "/api/v1/schedules/nightly/pause", None),
    ("POST", "/api/v1/schedules/nightly/resume", None),
    ("DELETE", "/api/v1/schedules/nightly", None),
]


def test_only_operators_write_agents_and_schedules(
    http: FlaskClient, tokens: dict[Role, str], operator: dict[str, str]
) -> None:
    assert http.post("/api/v1/agents", json=AGENT, headers=operator).status_code == 201
    assert http.post("/api/v1/schedules", json=SCHEDULE, headers=operator).status_code == 201
    for method, path, body in WRITES:
        for role in (Role.VIEWER, Role.SUBMITTER):
            response = http.open(path, method=method, json=body, headers=bearer(tokens[role]))
            assert response.status_code == 403, (method, path, role, response.text)
    viewer = bearer(tokens[Role.VIEWER])
    assert http.get("/api/v1/agents/triage", headers=viewer).json["version"] == 1
    assert [
        s["schedule"]["name"] for s in http.get("/api/v1/schedules", headers=viewer).json["items"]
    ] == ["nightly"]
    assert http.get("/api/v1/agents").status_code == 401


def test_agent_versions_through_the_api(http: FlaskClient, operator: dict[str, str]) -> None:
    created = http.post("/api/v1/agents", json=AGENT, headers=operator)
    assert created.status_code == 201 and created.headers["Location"].endswith("/agents/triage")
    assert created.json["created_by"] == "operator token"
    assert "already exists" in _error(
        http.post("/api/v1/agents", json=AGENT, headers=operator), 409
    )
    updated = http.put("/api/v1/agents/triage", json={"system_prompt": "Better."}, headers=operator)
    assert updated.status_code == 200 and updated.json["version"] == 2
    assert http.get("/api/v1/agents/triage", headers=operator).json["system_prompt"] == "Better."
    versions = http.get("/api/v1/agents/triage/versions", headers=operator).json["items"]
    assert [(v["version"], v["system_prompt"]) for v in versions] == [
        (1, "Sort it."),
        (2, "Better."),
    ]
    looser = {**AGENT, "name": "loose", "tools": {"send_email": "auto"}}
    assert "tools.send_email would loosen" in _error(
        http.post("/api/v1/agents", json=looser, headers=operator), 422
    )
    assert "name" in _error(
        http.post("/api/v1/agents", json={"name": "a b"}, headers=operator), 422
    )
    assert "no agent named 'ghost'" in _error(
        http.get("/api/v1/agents/ghost", headers=operator), 404
    )
    assert http.delete("/api/v1/agents/triage", headers=operator).json["version"] == 2
    assert http.get("/api/v1/agents", headers=operator).json == {"items": []}


def test_an_agent_in_use_is_deleted_only_when_forced(
    http: FlaskClient, operator: dict[str, str], svc: Services
) -> None:
    http.post("/api/v1/agents", json=AGENT, headers=operator)
    assert http.post("/api/v1/schedules", json=SCHEDULE, headers=operator).status_code == 201
    trigger = TriggerRequest(name="inbox", agent="triage", template="{payload.title}")
    TriggerStore(svc.redis, svc.keys).create(trigger, actor="test")
    refused = http.delete("/api/v1/agents/triage", headers=operator)
    message = _error(refused, 409)
    assert "schedules nightly" in message and "triggers inbox" in message
    assert refused.json["error"]["code"] == "conflict"
    assert http.get("/api/v1/agents/triage", headers=operator).status_code == 200
    assert "force" in _error(http.delete("/api/v1/agents/triage?force=yes", headers=operator), 400)
    forced = http.delete("/api/v1/agents/triage?force=true", headers=operator)
    assert forced.status_code == 200 and forced.json["version"] == 1
    assert http.get("/api/v1/agents/triage", headers=operator).status_code == 404
    assert http.get("/api/v1/schedules/nightly", headers=operator).status_code == 200


def test_a_conversation_and_a_batch_name_an_agent(
    http: FlaskClient, svc: Services, operator: dict[str, str], submitter: dict[str, str]
) -> None:
    http.post("/api/v1/agents", json=AGENT, headers=operator)
    made = http.post("/api/v1/conversations", json={"agent": "triage"}, headers=submitter)
    assert made.status_code == 201, made.text
    config = made.json["config"]
    assert (config["agent"], config["agent_version"], config["system_prompt"]) == (
        "triage",
        1,
        "Sort it.",
    )
    assert config["policy_may_loosen"] is False
    got = http.get(f"/api/v1/conversations/{made.json['id']}", headers=submitter).json
    assert (got["config"]["agent"], got["config"]["agent_version"]) == ("triage", 1)
    assert "decides system_prompt" in _error(
        http.post(
            "/api/v1/conversations",
            json={"agent": "triage", "system_prompt": "x"},
            headers=operator,
        ),
        422,
    )
    assert "no agent named 'ghost'" in _error(
        http.post("/api/v1/conversations", json={"agent": "ghost"}, headers=operator), 422
    )
    batch = http.post(
        "/api/v1/batches",
        json={"config": {"conversation": {"agent": "triage"}}, "items": [{"prompt": "one"}]},
        headers=operator,
    )
    assert batch.status_code in (200, 201), batch.text
    info = svc.batches.info(batch.json["batch"]["id"])
    assert (info.config.conversation.agent, info.config.conversation.agent_version) == ("triage", 1)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"cron": "not cron"}, "bad cron expression 'not cron'"),
        ({"timezone": "Atlantis/Capital"}, "unknown time zone 'Atlantis/Capital'"),
        ({"agent": "ghost"}, "no agent named 'ghost'"),
        ({"agent_version": 9}, "has no version 9"),
        ({"every_s": 60}, "exactly one of cron, every_s or at"),
        ({"cron": None, "at": "2001-01-01T00:00:00Z"}, "in the past"),
    ],
)
def test_bad_schedules_are_422_naming_the_problem(
    http: FlaskClient, operator: dict[str, str], change: dict[str, Any], problem: str
) -> None:
    http.post("/api/v1/agents", json=AGENT, headers=operator)
    body = {k: v for k, v in {**SCHEDULE, **change}.items() if v is not None}
    assert problem in _error(http.post("/api/v1/schedules", json=body, headers=operator), 422)


def test_schedule_lifecycle_through_the_api(http: FlaskClient, operator: dict[str, str]) -> None:
    http.post("/api/v1/agents", json=AGENT, headers=operator)
    body = {**SCHEDULE, "timezone": "Europe/Paris", "overlap": "queue", "conversation": "continue"}
    created = http.post("/api/v1/schedules", json=body, headers=operator)
    assert created.status_code == 201, created.text
    times = created.json["next_fire_times"]
    assert len(times) == 5 and all(
        later - earlier in (82_800, 86_400, 90_000) for earlier, later in itertools.pairwise(times)
    )
    assert "already exists" in _error(
        http.post("/api/v1/schedules", json=body, headers=operator), 409
    )
    paused = http.post("/api/v1/schedules/nightly/pause", headers=operator).json
    assert paused["paused"] is True and paused["next_fire_times"] == []
    resumed = http.post("/api/v1/schedules/nightly/resume", headers=operator).json
    assert resumed["paused"] is False and resumed["next_fire_times"] == times
    assert http.get("/api/v1/schedules/nightly/runs", headers=operator).json == {"items": []}
    assert http.delete("/api/v1/schedules/nightly", headers=operator).status_code == 200
    assert "no schedule named 'nightly'" in _error(
        http.get("/api/v1/schedules/nightly", headers=operator), 404
    )


def test_the_agents_page(signed_in: FlaskClient, svc: Services) -> None:
    page = signed_in.get("/agents")
    assert page.status_code == 200 and "No agents yet" in page.text
    csrf = form_csrf(page.text)
    created = signed_in.post(
        "/agents/new",
        data={
            "csrf_token": csrf,
            "name": "pager",
            "system_prompt": "<b>bold</b>",
            "tools": '{"calculator": "ask"}',
        },
        follow_redirects=True,
    )
    assert "Agent pager created (version 1)" in created.text
    assert "&lt;b&gt;bold&lt;/b&gt;" in created.text and "<b>bold</b>" not in created.text
    edited = signed_in.post(
        "/agents/pager/update",
        data={
            "csrf_token": csrf,
            "system_prompt": 'Page "ops".',
            "tools": '{"calculator": "deny"}',
        },
        follow_redirects=True,
    )
    assert "Agent pager is now version 2." in edited.text
    now = svc.stores.agents.get("pager")
    assert (now.version, now.system_prompt, now.tools) == (2, 'Page "ops".', {"calculator": "deny"})
    assert (
        "Save as version 3" in edited.text and "&#34;calculator&#34;: &#34;deny&#34;" in edited.text
    )
    looser = signed_in.post(
        "/agents/pager/update",
        data={"csrf_token": csrf, "tools": '{"send_email": "auto"}'},
        follow_redirects=True,
    )
    assert "Agent pager not changed" in looser.text and "would loosen" in looser.text
    refused = signed_in.post(
        "/schedules/new",
        data={
            "csrf_token": csrf,
            "name": "p",
            "agent": "pager",
            "prompt": "go",
            "cron": "99 * * * *",
        },
        follow_redirects=True,
    )
    assert "Schedule not created" in refused.text and "bad cron expression" in refused.text
    made = signed_in.post(
        "/schedules/new",
        data={"csrf_token": csrf, "name": "p", "agent": "pager", "prompt": "go", "every_s": "60"},
        follow_redirects=True,
    )
    assert "Schedule p created." in made.text and 'data-schedule="p"' in made.text
    paused = signed_in.post("/schedules/p/pause", data={"csrf_token": csrf}, follow_redirects=True)
    assert "Schedule p paused." in paused.text and svc.stores.schedules.status("p").paused
    assert signed_in.post("/schedules/p/delete", data={}).status_code == 403  # no CSRF token
    assert svc.stores.schedules.get("p").name == "p"
    kept = signed_in.post("/agents/pager/delete", data={"csrf_token": csrf}, follow_redirects=True)
    assert "is used by schedules p" in kept.text and svc.stores.agents.get("pager")
    forced = signed_in.post(
        "/agents/pager/delete", data={"csrf_token": csrf, "force": "on"}, follow_redirects=True
    )
    assert "Agent pager deleted." in forced.text and svc.stores.agents.list() == []


def test_the_agents_page_sets_the_context_size_and_the_model_settings(
    signed_in: FlaskClient, svc: Services
) -> None:
    csrf = form_csrf(signed_in.get("/agents").text)
    fields = {
        "csrf_token": csrf,
        "name": "tuned",
        "provider": "openai",
        "context_tokens": "4096",
        "max_output_tokens": "256",
        "temperature": "0.2",
        "top_p": "0.9",
        "seed": "7",
        "reasoning_effort": "low",
        "parallel_tool_calls": "false",
        "stop": "</end>\r\nSTOP\r\n",
        "extra": '{"top_k": 40, "note": "<i>x</i>"}',
    }
    created = signed_in.post("/agents/new", data=fields, follow_redirects=True)
    assert "Agent tuned created (version 1)" in created.text
    agent = svc.stores.agents.get("tuned")
    assert agent.context_tokens == 4096
    assert agent.model_settings is not None
    assert agent.model_settings.model_dump(exclude_none=True) == {
        "max_output_tokens": 256,
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
        "reasoning_effort": "low",
        "parallel_tool_calls": False,
        "stop": ["</end>", "STOP"],
        "extra": {"top_k": 40, "note": "<i>x</i>"},
    }
    # The edit form shows them back, escaped, so saving it unchanged keeps them.
    page = created.text
    assert (
        'name="context_tokens" type="number" min="1" max="1000000000" step="1" value="4096"' in page
    )
    assert '<option value="low" selected>' in page and '<option value="false" selected>' in page
    assert "&lt;/end&gt;\nSTOP</textarea>" in page and "<i>x</i>" not in page
    assert "&#34;note&#34;: &#34;&lt;i&gt;x&lt;/i&gt;&#34;" in page
    edit = {k: v for k, v in fields.items() if k != "name"} | {"context_tokens": "8192"}
    saved = signed_in.post("/agents/tuned/update", data=edit, follow_redirects=True)
    assert "Agent tuned is now version 2." in saved.text
    now = svc.stores.agents.get("tuned")
    assert now.context_tokens == 8192 and now.model_settings == agent.model_settings
    cleared = signed_in.post(
        "/agents/tuned/update", data={"csrf_token": csrf, "provider": "openai"}
    )
    assert cleared.status_code == 302
    now = svc.stores.agents.get("tuned")
    assert (now.version, now.context_tokens, now.model_settings) == (3, None, None)

    for bad, named in [
        ({"context_tokens": "0"}, "context_tokens"),
        ({"context_tokens": "lots"}, "context_tokens: &#39;lots&#39; is not a whole number"),
        ({"temperature": "3"}, "temperature"),
        ({"top_p": "most"}, "top_p: &#39;most&#39; is not a number"),
        ({"parallel_tool_calls": "maybe"}, "parallel_tool_calls"),
        ({"extra": "[1]"}, "extra: a JSON object"),
        ({"extra": "{"}, "extra: not JSON"),
        ({"reasoning_effort": "<b>max</b>"}, "reasoning_effort"),
        ({"stop": "\n".join(f"s{n}" for n in range(9))}, "stop"),
        ({"provider": "scripted", "temperature": "0.5"}, "temperature"),
    ]:
        refused = signed_in.post(
            "/agents/tuned/update",
            data={"csrf_token": csrf, "provider": "openai", **bad},
            follow_redirects=True,
        )
        assert "Agent tuned not changed" in refused.text, bad
        assert named in refused.text, (bad, refused.text[-2000:])
        assert "<b>max</b>" not in refused.text
    assert svc.stores.agents.get("tuned").version == 3
    no_token = signed_in.post("/agents/tuned/update", data={"context_tokens": "100"})
    assert no_token.status_code == 403 and svc.stores.agents.get("tuned").version == 3
