"""Named agents: versions, the operator's policy as their bound, and the options they give."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis

from shared.client.aio import AsyncClient
from shared.errors import Conflict, InvalidInput, NotFound
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.agents import AgentSpec, NewAgent
from shared.models.config import ConversationOptions, ToolPolicy
from shared.settings import Settings
from shared.store.agents import AgentStore, agent_options, resolve_options
from shared.store.keys import KeySpace
from shared.store.policy import PolicyRule, PolicyStore, ToolInfo


@pytest.fixture
def policies(fake_redis: redis.Redis, keys: KeySpace) -> PolicyStore:
    store = PolicyStore(fake_redis, keys)
    store.publish_catalog(
        [
            ToolInfo(name="calculator", default_policy=ToolPolicy.AUTO),
            ToolInfo(name="send_email", default_policy=ToolPolicy.ASK),
        ]
    )
    return store


@pytest.fixture
def agents(fake_redis: redis.Redis, keys: KeySpace, policies: PolicyStore) -> AgentStore:
    return AgentStore(fake_redis, keys, policies)


def test_versions_latest_and_delete(agents: AgentStore) -> None:
    first = agents.create(NewAgent(name="triage", system_prompt="one"), actor="ada")
    assert (first.version, first.created_by) == (1, "ada")
    with pytest.raises(Conflict, match="already exists"):
        agents.create(NewAgent(name="triage"), actor="ada")
    second = agents.update("triage", AgentSpec(system_prompt="two"), actor="bob")
    assert second.version == 2
    assert agents.get("triage").system_prompt == "two"
    assert agents.get("triage", 1).system_prompt == "one"
    assert [a.version for a in agents.versions("triage")] == [1, 2]
    agents.create(NewAgent(name="alpha"), actor="ada")
    assert [(a.name, a.version) for a in agents.list()] == [("alpha", 1), ("triage", 2)]
    with pytest.raises(NotFound, match="has no version 7"):
        agents.get("triage", 7)
    agents.delete("triage")
    with pytest.raises(NotFound, match="no agent named 'triage'"):
        agents.get("triage")
    with pytest.raises(NotFound):
        agents.update("triage", AgentSpec(), actor="ada")
    with pytest.raises(NotFound):
        agents.delete("triage")


def test_tools_sit_inside_the_operators_policy(agents: AgentStore, policies: PolicyStore) -> None:
    narrower = NewAgent(name="a", tools={"calculator": ToolPolicy.ASK, "send_email": "deny"})
    assert agents.create(narrower, actor="ada").tools == narrower.tools
    with pytest.raises(InvalidInput, match=r"tools\.send_email would loosen"):
        agents.create(NewAgent(name="b", tools={"send_email": ToolPolicy.AUTO}), actor="ada")
    policies.set(PolicyRule(tool="calculator", policy=ToolPolicy.ASK), actor="ada")
    with pytest.raises(InvalidInput, match=r"tools\.calculator"):
        agents.update("a", AgentSpec(tools={"calculator": ToolPolicy.AUTO}), actor="ada")
    with pytest.raises(InvalidInput, match="schema"):
        agents.create(NewAgent(name="c", response_schema={"type": "nonsense"}), actor="ada")


def test_a_conversation_runs_as_the_agent_and_records_it(agents: AgentStore) -> None:
    settings = Settings()
    agents.create(
        NewAgent(
            name="triage",
            system_prompt="Sort it.",
            model="other-model",
            tools={"calculator": ToolPolicy.AUTO},
            max_model_calls=3,
            approval_timeout_s=60,
            metadata={"team": "ops"},
        ),
        actor="ada",
    )
    agents.update("triage", AgentSpec(system_prompt="Sort it better."), actor="ada")
    chosen = ConversationOptions(agent="triage", max_history_size=50)
    config = resolve_options(chosen, settings, policy_may_loosen=True, agents=agents)
    assert (config.agent, config.agent_version) == ("triage", 2)
    assert config.system_prompt == "Sort it better."
    assert config.policy_may_loosen is False  # an agent only narrows, whoever creates it
    assert config.max_history_size == 50
    pinned = ConversationOptions(agent="triage", agent_version=1)
    old = resolve_options(pinned, settings, policy_may_loosen=False, agents=agents)
    assert (old.agent_version, old.model, old.limits.max_model_calls) == (1, "other-model", 3)
    assert (old.approval_timeout_s, old.metadata, old.tools) == (
        60,
        {"team": "ops"},
        {"calculator": "auto"},
    )
    with pytest.raises(InvalidInput, match="decides allow_all, system_prompt"):
        agent_options(agents.get("triage"), ConversationOptions(allow_all=True, system_prompt="x"))
    with pytest.raises(InvalidInput, match="no agent named 'nope'"):
        resolve_options(
            ConversationOptions(agent="nope"), settings, policy_may_loosen=False, agents=agents
        )
    with pytest.raises(InvalidInput, match="agent_version needs agent"):
        resolve_options(
            ConversationOptions(agent_version=2), settings, policy_may_loosen=False, agents=agents
        )
    plain = resolve_options(ConversationOptions(), settings, policy_may_loosen=True, agents=agents)
    assert (plain.agent, plain.agent_version, plain.policy_may_loosen) == (None, None, True)


def test_the_async_client_names_an_agent_too(redis_server: EmbeddedRedis) -> None:
    settings = Settings(redis_url=redis_server.url, key_prefix=f"aa{uuid.uuid4().hex[:8]}")

    async def scenario() -> tuple[str | None, int | None, bool]:
        async with AsyncClient(settings) as aclient:
            aclient.agents.create(NewAgent(name="async", system_prompt="Hi."), actor="t")
            made = await aclient.new_conversation(agent="async")
            config = (await made.record()).config
            return config.agent, config.agent_version, config.policy_may_loosen

    assert asyncio.run(scenario()) == ("async", 1, False)
