"""The operator's tool policy as pure functions, and its store (rules, log, catalog)."""

from __future__ import annotations

import pytest
import redis
from pydantic import ValidationError

from shared.errors import NotFound
from shared.models.config import ConversationConfig, ToolPolicy
from shared.store.keys import KeySpace
from shared.store.policy import (
    ALWAYS_ASK,
    OperatorPolicy,
    PolicyRule,
    PolicyStore,
    ToolInfo,
    effective_policy,
    loosening_fields,
    policy_table,
    stricter,
)
from worker.tools.ask_operator import ASK_OPERATOR

AUTO, ASK, DENY = ToolPolicy.AUTO, ToolPolicy.ASK, ToolPolicy.DENY


def rules(*items: PolicyRule) -> OperatorPolicy:
    return OperatorPolicy(tuple(items))


def submitted(**options: object) -> ConversationConfig:
    return ConversationConfig.model_validate(options)


def test_stricter_orders_deny_over_ask_over_auto() -> None:
    assert stricter(AUTO, ASK) is ASK and stricter(ASK, AUTO) is ASK
    assert stricter(DENY, ASK) is DENY and stricter(AUTO, DENY) is DENY
    assert stricter(AUTO, AUTO) is AUTO


def test_the_most_specific_rule_wins_and_labels_take_the_strictest() -> None:
    policy = rules(
        PolicyRule(tool="t", policy=ASK),
        PolicyRule(tool="t", policy=AUTO, batch_id="b1"),
        PolicyRule(tool="t", policy=AUTO, label="trusted"),
        PolicyRule(tool="t", policy=DENY, label="frozen"),
    )
    assert policy.base("t", default=AUTO) is ASK
    assert policy.base("t", default=AUTO, batch_id="b1") is AUTO
    assert policy.base("t", default=AUTO, batch_id="b2") is ASK
    assert policy.base("t", default=ASK, labels=["trusted"]) is AUTO
    assert policy.base("t", default=ASK, labels=["trusted", "frozen"]) is DENY
    assert policy.base("other", default=DENY) is DENY  # no rule: the tool's default


def test_a_submitters_conversation_can_only_tighten() -> None:
    policy = rules(PolicyRule(tool="mail", policy=ASK))
    loose = submitted(tools={"mail": "auto"}, allow_all=True)
    assert effective_policy("mail", default=ASK, operator=policy, config=loose) is ASK
    tight = submitted(tools={"mail": "deny", "calc": "ask"})
    assert effective_policy("mail", default=ASK, operator=policy, config=tight) is DENY
    assert effective_policy("calc", default=AUTO, operator=policy, config=tight) is ASK
    assert effective_policy("other", default=AUTO, operator=policy, config=tight) is None


def test_an_operators_conversation_may_loosen_but_deny_always_wins() -> None:
    policy = rules(PolicyRule(tool="mail", policy=ASK), PolicyRule(tool="rm", policy=DENY))
    trusted = submitted(allow_all=True, policy_may_loosen=True)
    assert effective_policy("mail", default=ASK, operator=policy, config=trusted) is AUTO
    assert effective_policy("rm", default=AUTO, operator=policy, config=trusted) is DENY
    mapped = submitted(tools={"mail": "auto", "rm": "auto"}, policy_may_loosen=True)
    assert effective_policy("mail", default=ASK, operator=policy, config=mapped) is AUTO
    assert effective_policy("rm", default=AUTO, operator=policy, config=mapped) is DENY


def test_sticky_allows_and_questions() -> None:
    policy = rules(PolicyRule(tool="rm", policy=DENY))
    config = submitted(allow_all=True, policy_may_loosen=True)
    assert ASK_OPERATOR in ALWAYS_ASK  # the worker's tool is the one the rule names
    assert effective_policy(ASK_OPERATOR, default=ASK, operator=policy, config=config) is ASK
    plain = submitted()
    assert effective_policy("mail", default=ASK, operator=policy, config=plain) is ASK
    assert (
        effective_policy("mail", default=ASK, operator=policy, config=plain, sticky_allow=True)
        is AUTO
    )
    assert (
        effective_policy("rm", default=AUTO, operator=policy, config=plain, sticky_allow=True)
        is DENY
    )


def test_loosening_fields_name_what_a_submitter_may_not_ask_for() -> None:
    catalog = {
        "mail": ToolInfo(name="mail", default_policy=ASK),
        "calc": ToolInfo(name="calc", default_policy=AUTO),
    }
    policy = rules(PolicyRule(tool="calc", policy=ASK, batch_id="b1"))
    assert loosening_fields(
        tools={"mail": AUTO, "calc": AUTO, "unknown": AUTO, "x": ASK},
        allow_all=True,
        operator=policy,
        catalog=catalog,
    ) == ["allow_all", "tools.mail", "tools.unknown"]
    assert loosening_fields(
        tools={"calc": AUTO}, allow_all=False, operator=policy, catalog=catalog, batch_id="b1"
    ) == ["tools.calc"]
    assert (
        loosening_fields(tools={"mail": DENY}, allow_all=False, operator=policy, catalog=catalog)
        == []
    )


def test_policy_table_shows_every_described_tool() -> None:
    catalog = {
        "mail": ToolInfo(name="mail", default_policy=ASK),
        "calc": ToolInfo(name="calc", default_policy=AUTO),
    }
    table = policy_table(catalog, rules(), submitted(tools={"calc": "deny"}))
    assert table == {"calc": DENY, "mail": None}


def test_a_rule_has_one_scope_and_valid_names() -> None:
    with pytest.raises(ValidationError, match="not both"):
        PolicyRule(tool="t", policy=ASK, batch_id="b", label="l")
    with pytest.raises(ValidationError):
        PolicyRule(tool="bad name", policy=ASK)
    with pytest.raises(ValidationError):
        PolicyRule(tool="t", policy=ASK, batch_id="b\n")


def test_store_sets_removes_and_logs(fake_redis: redis.Redis, keys: KeySpace) -> None:
    store = PolicyStore(fake_redis, keys)
    store.set(PolicyRule(tool="mail", policy=DENY), actor="ada")
    store.set(PolicyRule(tool="mail", policy=AUTO, label="ops:trusted"), actor="ada")
    first = store.set(PolicyRule(tool="mail", policy=ASK), actor="bob")
    assert (first.before, first.after) == (DENY, ASK)
    loaded = store.load()
    assert loaded.base("mail", default=AUTO) is ASK
    assert loaded.base("mail", default=DENY, labels=["ops:trusted"]) is AUTO
    removed = store.remove("mail", label="ops:trusted", actor="bob")
    assert (removed.scope, removed.before, removed.after) == ("label:ops:trusted", AUTO, None)
    with pytest.raises(NotFound, match="no policy rule for tool 'mail' in scope batch:b1"):
        store.remove("mail", batch_id="b1", actor="bob")
    log = store.changes()
    assert [(c.actor, c.scope, c.after) for c in log] == [
        ("bob", "label:ops:trusted", None),
        ("bob", "*", ASK),
        ("ada", "label:ops:trusted", AUTO),
        ("ada", "*", DENY),
    ]


def test_store_skips_what_does_not_parse(fake_redis: redis.Redis, keys: KeySpace) -> None:
    store = PolicyStore(fake_redis, keys)
    fake_redis.hset(keys.policy_rules(), mapping={"mail|*": "sometimes", "calc|*": "deny"})
    fake_redis.hset(
        keys.tool_catalog(),
        mapping={"bad": "{", "calc": '{"name": "calc", "default_policy": "auto"}'},
    )
    assert [r.tool for r in store.load().rules] == ["calc"]
    assert list(store.catalog()) == ["calc"]
