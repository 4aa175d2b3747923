"""The approval gate at the API's edge: a submitter can only tighten the operator's policy.

Each finding of the gate review is reproduced here: `allow_all` or a looser `tools`
entry from a submitter, batch conversation squatting, ids outside the caller's
namespace, acting on someone else's conversation, and non-finite numbers.
"""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from shared.models.config import ToolPolicy
from shared.models.users import Role
from shared.store.policy import PolicyRule, ToolInfo
from tests.web.conftest import bearer, body_validator, new_conversation
from webui.services import Services

CATALOG = [
    ToolInfo(name="send_email", description="Sends mail.", default_policy=ToolPolicy.ASK),
    ToolInfo(name="calculator", description="Maths.", default_policy=ToolPolicy.AUTO),
]


@pytest.fixture(autouse=True)
def described_tools(svc: Services) -> None:
    """What a worker publishes when it starts."""
    svc.policies.publish_catalog(CATALOG)


def forbidden_fields(response: Any) -> list[str]:
    assert response.status_code == 403, response.text
    assert response.json["error"]["code"] == "forbidden"
    return [d["field"] for d in response.json["error"]["details"] or []]


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"allow_all": True}, ["allow_all"]),
        ({"tools": {"send_email": "auto"}}, ["tools.send_email"]),
        ({"tools": {"never_described": "auto"}}, ["tools.never_described"]),
        ({"allow_all": True, "tools": {"send_email": "auto"}}, ["allow_all", "tools.send_email"]),
        ({"labels": ["trusted"]}, ["labels"]),
    ],
)
def test_a_submitter_cannot_loosen_the_policy(
    http: FlaskClient,
    submitter: dict[str, str],
    svc: Services,
    body: dict[str, Any],
    fields: list[str],
) -> None:
    response = http.post("/api/v1/conversations", json=body, headers=submitter)
    assert forbidden_fields(response) == fields
    for field in fields:
        assert field in response.json["error"]["message"]
    assert svc.redis.zcard(svc.keys.conversations(0)) == 0


def test_a_submitter_may_tighten_and_the_detail_shows_the_effect(
    http: FlaskClient, submitter: dict[str, str], svc: Services
) -> None:
    cid = new_conversation(http, submitter, tools={"send_email": "deny", "calculator": "ask"})
    detail = http.get(f"/api/v1/conversations/{cid}", headers=submitter).json
    assert detail["tool_policy"] == {"calculator": "ask", "send_email": "deny"}
    assert detail["config"]["policy_may_loosen"] is False
    other = new_conversation(http, submitter)
    table = http.get(f"/api/v1/conversations/{other}", headers=submitter).json["tool_policy"]
    assert table == {"calculator": "auto", "send_email": "ask"}


def test_an_operator_rule_binds_submitters_and_is_shown(
    http: FlaskClient, submitter: dict[str, str], operator: dict[str, str]
) -> None:
    rule = {"tool": "calculator", "policy": "ask"}
    assert http.put("/api/v1/policy/rules", json=rule, headers=submitter).status_code == 403
    changed = http.put("/api/v1/policy/rules", json=rule, headers=operator)
    assert changed.status_code == 200, changed.text
    assert changed.json["before"] is None and changed.json["after"] == "ask"
    refused = http.post(
        "/api/v1/conversations", json={"tools": {"calculator": "auto"}}, headers=submitter
    )
    assert forbidden_fields(refused) == ["tools.calculator"]
    cid = new_conversation(http, submitter)
    assert (
        http.get(f"/api/v1/conversations/{cid}", headers=submitter).json["tool_policy"][
            "calculator"
        ]
        == "ask"
    )
    shown = http.get("/api/v1/policy", headers=submitter).json
    rule = {"tool": "calculator", "policy": "ask", "batch_id": None, "label": None}
    assert rule | {"approvals": 1, "separation": None} in shown["rules"]
    assert {t["name"]: t["policy"] for t in shown["tools"]} == {
        "send_email": "ask",
        "calculator": "ask",
    }
    log = http.get("/api/v1/policy/log", headers=submitter).json["items"]
    assert log[0]["tool"] == "calculator" and log[0]["actor"] == "operator token"


def test_an_operator_may_loosen(http: FlaskClient, operator: dict[str, str]) -> None:
    cid = new_conversation(http, operator, allow_all=True, labels=["ops"])
    detail = http.get(f"/api/v1/conversations/{cid}", headers=operator).json
    assert detail["tool_policy"] == {"calculator": "auto", "send_email": "auto"}
    assert detail["config"]["labels"] == ["ops"]


def test_removing_a_rule(http: FlaskClient, operator: dict[str, str], svc: Services) -> None:
    svc.policies.set(PolicyRule(tool="calculator", policy=ToolPolicy.DENY, label="x"), actor="t")
    missing = http.delete("/api/v1/policy/rules/calculator", headers=operator)
    assert missing.status_code == 404 and "scope *" in missing.json["error"]["message"]
    removed = http.delete("/api/v1/policy/rules/calculator?label=x", headers=operator)
    assert removed.status_code == 200 and removed.json["before"] == "deny"
    assert svc.policies.load().rules == ()
    both = http.delete("/api/v1/policy/rules/calculator?label=x&batch_id=b", headers=operator)
    assert both.status_code == 404 and "both" in both.json["error"]["message"]
    empty = http.delete("/api/v1/policy/rules/calculator?label=", headers=operator)
    assert empty.status_code == 400  # not read as "no label": that would remove the global rule


# Schemathesis's finding ("separation": 0 was taken as false), the other types read strictly,
# and the rule the document now states: approvals and separation are an ask rule's options.
REFUSED_RULES = [
    ({"tool": "calculator", "policy": "ask", "separation": 0}, "separation"),
    ({"tool": "calculator", "policy": "ask", "separation": "true"}, "separation"),
    ({"tool": "calculator", "policy": "ask", "approvals": True}, "approvals"),
    ({"tool": "calculator", "policy": "ask", "approvals": "2"}, "approvals"),
    ({"tool": "calculator", "policy": "auto", "approvals": 2}, "ask rule only"),
    ({"tool": "calculator", "policy": "deny", "separation": True}, "ask rule only"),
]
ACCEPTED_RULES = [
    {"tool": "calculator", "policy": "ask", "approvals": 2.0, "separation": False},
    {"tool": "calculator", "policy": "auto", "approvals": 1, "separation": False},
    {"tool": "calculator", "policy": "deny", "separation": None},
]


def test_the_document_says_which_rules_the_api_takes(
    http: FlaskClient, operator: dict[str, str], svc: Services
) -> None:
    takes = body_validator(http, operator, "put", "/api/v1/policy/rules")
    for body, words in REFUSED_RULES:
        assert not takes.is_valid(body), body
        refused = http.put("/api/v1/policy/rules", json=body, headers=operator)
        assert refused.status_code == 422 and words in refused.json["error"]["message"], body
    assert svc.policies.load().rules == ()
    for body in ACCEPTED_RULES:
        assert takes.is_valid(body), body
        assert http.put("/api/v1/policy/rules", json=body, headers=operator).status_code == 200
    assert [r.policy for r in svc.policies.load().rules] == [ToolPolicy.DENY]


def test_chosen_ids_live_in_the_callers_namespace(
    http: FlaskClient, svc: Services, operator: dict[str, str]
) -> None:
    alice = bearer(svc.tokens.create("alice", Role.SUBMITTER))
    refused = http.post(
        "/api/v1/conversations", json={"conversation_id": "shared-1"}, headers=alice
    )
    assert forbidden_fields(refused) == ["conversation_id"]
    assert "'alice.'" in refused.json["error"]["message"]
    assert new_conversation(http, alice, conversation_id="alice.job-1") == "alice.job-1"
    assert new_conversation(http, operator, conversation_id="anything") == "anything"
    spaced = bearer(svc.tokens.create("ci bot", Role.SUBMITTER))
    assert forbidden_fields(
        http.post("/api/v1/conversations", json={"conversation_id": "x"}, headers=spaced)
    ) == ["conversation_id"]
    batch = http.post(
        "/api/v1/batches", json={"batch_id": "nightly", "items": [{"prompt": "hi"}]}, headers=alice
    )
    assert forbidden_fields(batch) == ["batch_id"]


def test_only_the_creator_or_an_operator_acts_on_a_conversation(
    http: FlaskClient, svc: Services, operator: dict[str, str]
) -> None:
    alice = bearer(svc.tokens.create("alice", Role.SUBMITTER))
    mallory = bearer(svc.tokens.create("mallory", Role.SUBMITTER))
    theirs = new_conversation(http, operator, allow_all=True)
    mine = new_conversation(http, alice)
    for cid in (theirs, mine):
        sent = http.post(
            f"/api/v1/conversations/{cid}/prompts", json={"text": "hi"}, headers=mallory
        )
        assert sent.status_code == 403 and cid in sent.json["error"]["message"]
        for action in ("abort", "close"):
            done = http.post(f"/api/v1/conversations/{cid}/{action}", headers=mallory)
            assert done.status_code == 403
    assert svc.redis.llen(svc.keys.inbox(theirs)) == 0
    ok = http.post(f"/api/v1/conversations/{mine}/prompts", json={"text": "hi"}, headers=alice)
    assert ok.status_code == 202


def test_a_submitter_batch_cannot_loosen_or_join_anothers_batch(
    http: FlaskClient, svc: Services, operator: dict[str, str]
) -> None:
    alice = bearer(svc.tokens.create("alice", Role.SUBMITTER))
    loose = http.post(
        "/api/v1/batches",
        json={"config": {"conversation": {"allow_all": True}}, "items": [{"prompt": "x"}]},
        headers=alice,
    )
    assert forbidden_fields(loose) == ["config.conversation.allow_all"]
    made = http.post(
        "/api/v1/batches",
        json={"batch_id": "ops-nightly", "items": [{"id": "a", "prompt": "x"}]},
        headers=operator,
    )
    assert made.status_code == 201
    joined = http.post(
        "/api/v1/batches",
        json={"batch_id": "ops-nightly", "items": [{"id": "b", "prompt": "y"}]},
        headers=alice,
    )
    assert joined.status_code == 403 and "ops-nightly" in joined.json["error"]["message"]
    assert http.post("/api/v1/batches/ops-nightly/cancel", headers=alice).status_code == 403
    assert svc.batches.info("ops-nightly").total == 1


def test_batch_squatting_is_refused_never_adopted(
    http: FlaskClient, svc: Services, operator: dict[str, str]
) -> None:
    """The attacker pre-creates the conversation a later item of the batch will use."""
    made = http.post(
        "/api/v1/batches",
        json={"batch_id": "nightly", "items": [{"id": "one", "prompt": "x"}]},
        headers=operator,
    )
    assert made.status_code == 201
    squatted = svc.batches.conversation_id("nightly", "two")
    svc.client.new_conversation(conversation_id=squatted, allow_all=True, system_prompt="evil")
    added = http.post(
        "/api/v1/batches",
        json={"batch_id": "nightly", "items": [{"id": "two", "prompt": "y"}]},
        headers=operator,
    )
    assert added.status_code == 409, added.text
    assert squatted in added.json["error"]["message"]
    assert svc.redis.llen(svc.keys.inbox(squatted)) == 0
    info = svc.batches.info("nightly")
    assert info.total == 1


def test_an_item_whose_conversation_appears_midway_fails_instead_of_running(
    svc: Services,
) -> None:
    """The race the check cannot close: the submit script refuses a foreign conversation."""
    from shared.models.batches import BatchConfig
    from shared.models.content import as_content
    from shared.store.batches import BatchLine

    bid = svc.batches.create(BatchConfig(), batch_id="race")
    cid = svc.batches.conversation_id(bid, "x")

    def squat_after_the_check(*_: object) -> None:
        """Stands in for the check: the squatter's conversation appears right after it."""
        svc.client.new_conversation(conversation_id=cid, allow_all=True)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(svc.batches, "_refuse_taken", squat_after_the_check)
        svc.batches.submit(bid, [BatchLine(1, "x", prompt=as_content("hello"))])
    svc.batches.finish_submission(bid)
    assert svc.redis.llen(svc.keys.inbox(cid)) == 0
    [result] = list(svc.batches.results(bid))
    assert result["status"] == "failed" and "already existed" in result["error"]
    assert svc.batches.info(bid).status.value == "done"


@pytest.mark.parametrize(
    "body",
    [
        '{"timeout_s": 1e999}',
        '{"timeout_s": NaN}',
        '{"timeout_s": 1e9}',
        '{"max_model_calls": 100000000000}',
        '{"approval_timeout_s": 1e999}',
        '{"conversation_id": "abc\\n"}',
        '{"labels": ["a b"]}',
    ],
)
def test_numbers_and_ids_are_bounded_at_the_edge(
    http: FlaskClient, operator: dict[str, str], svc: Services, body: str
) -> None:
    response = http.post(
        "/api/v1/conversations",
        data=body,
        headers={**operator, "Content-Type": "application/json"},
    )
    assert response.status_code in (400, 422), response.text
    assert svc.redis.zcard(svc.keys.conversations(0)) == 0


def test_a_batch_with_an_infinite_timeout_is_refused(
    http: FlaskClient, operator: dict[str, str], svc: Services
) -> None:
    response = http.post(
        "/api/v1/batches",
        data='{"config": {"conversation": {"timeout_s": 1e999}}, "items": [{"prompt": "x"}]}',
        headers={**operator, "Content-Type": "application/json"},
    )
    assert response.status_code in (400, 422), response.text
    assert svc.redis.zcard(svc.keys.batches()) == 0
    assert http.get("/api/v1/batches", headers=operator).status_code == 200
