"""The gate with a real worker: what runs, what parks, what is refused, decided by the worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.client import Client
from shared.models.config import ToolPolicy
from shared.models.events import ConversationStatus
from shared.models.users import Role
from shared.settings import Settings
from shared.store.policy import PolicyRule
from tests.web.conftest import new_conversation, services_of, wait_for

EMAIL = 'call send_email {"to": "ops@example.com", "subject": "Hi", "body": "Hello."}'


EFFECT_TOOLS = True  # tests.effect_tools, logging to `effects` (tests/conftest.py)
STACK_ENV = {}


@pytest.fixture
def http(stack_app: Flask) -> FlaskClient:
    return stack_app.test_client()


@pytest.fixture
def direct(stack_env: dict[str, str]) -> Iterator[Client]:
    settings = Settings(
        redis_url=stack_env["SIGNOFF_REDIS_URL"], key_prefix=stack_env["SIGNOFF_KEY_PREFIX"]
    )
    with Client(settings) as client:
        yield client


@pytest.fixture(autouse=True)
def no_rules(direct: Client) -> Iterator[None]:
    yield
    direct.redis.delete(direct.keys.policy_rules())


def effect(note: str) -> str:
    return f'call record_effect {{"note": "{note}"}}'


def ran(effects: Path, note: str) -> bool:
    return effects.exists() and f" {note}\n" in effects.read_text()


def test_the_worker_describes_its_tools(
    http: FlaskClient, roles: dict[Role, dict[str, str]]
) -> None:
    tools = {
        t["name"]: t for t in http.get("/api/v1/policy", headers=roles[Role.VIEWER]).json["tools"]
    }
    assert tools["send_email"]["default_policy"] == "ask"
    assert tools["write_file"]["default_policy"] == "ask"
    assert tools["record_effect"]["default_policy"] == "auto"


def test_a_stored_allow_all_without_authority_still_parks(direct: Client, effects: Path) -> None:
    """Even a record that says allow_all (as one written before the gate would) cannot open it."""
    conversation = direct.new_conversation(allow_all=True, policy_may_loosen=False)
    conversation.send(EMAIL)
    wait_for(
        lambda: conversation.status is ConversationStatus.WAITING_FOR_USER,
        "the conversation to park on send_email",
    )
    [note] = conversation.pending_notifications()
    assert note.tool_call is not None and note.tool_call.name == "send_email"


def test_an_operator_rule_applies_to_the_next_call_of_a_running_conversation(
    http: FlaskClient, roles: dict[Role, dict[str, str]], effects: Path
) -> None:
    submitter = roles[Role.SUBMITTER]
    cid = new_conversation(http, submitter)
    sent = http.post(
        f"/api/v1/conversations/{cid}/prompts",
        json={"text": effect("before-rule")},
        headers=submitter,
    )
    assert sent.status_code == 202
    wait_for(lambda: ran(effects, "before-rule"), "record_effect to run under its default (auto)")
    rule = {"tool": "record_effect", "policy": "ask"}
    assert (
        http.put("/api/v1/policy/rules", json=rule, headers=roles[Role.OPERATOR]).status_code == 200
    )
    http.post(
        f"/api/v1/conversations/{cid}/prompts",
        json={"text": effect("after-rule")},
        headers=submitter,
    )
    detail = wait_for(
        lambda: (
            (d := http.get(f"/api/v1/conversations/{cid}", headers=submitter).json)["status"]
            == "waiting_for_user"
            and d
        ),
        "the conversation to park under the operator's rule",
    )
    assert detail["tool_policy"]["record_effect"] == "ask"
    assert not ran(effects, "after-rule")


def test_an_operator_deny_beats_allow_all(stack_app: Flask, direct: Client, effects: Path) -> None:
    services_of(stack_app).policies.set(
        PolicyRule(tool="record_effect", policy=ToolPolicy.DENY), actor="ada"
    )
    conversation = direct.new_conversation(allow_all=True)
    response = conversation.chat_to_completion(effect("denied"))
    assert not ran(effects, "denied")
    assert "denied by policy" in response.text
    assert conversation.pending_notifications() == []
