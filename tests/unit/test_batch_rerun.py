"""Re-running a batch on a real redis-server, without a worker: a new batch of the same
inputs, linked to its source, with the configuration changed as asked."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from shared.errors import Conflict, InvalidInput
from shared.models.agents import AgentSpec, NewAgent
from shared.models.batches import BatchConfig, RerunChanges
from shared.models.config import ConversationOptions, PromptOptions, ToolSelection
from shared.models.content import Content
from shared.models.model_settings import ModelSettings
from shared.settings import Settings
from shared.store.agents import AgentStore, resolve_options
from shared.store.batches import BatchLine, BatchStore
from shared.store.keys import KeySpace
from shared.store.policy import PolicyStore
from shared.store.reruns import BatchRerun

NONE = PromptOptions(tool_selection=ToolSelection.NONE)


@pytest.fixture
def store(real_redis: redis.Redis, keys: KeySpace) -> BatchStore:
    return BatchStore(real_redis, keys, Settings())


@pytest.fixture
def agents(real_redis: redis.Redis, keys: KeySpace) -> AgentStore:
    return AgentStore(real_redis, keys, PolicyStore(real_redis, keys))


def items(store: BatchStore, bid: str) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in store.client.lrange(store.keys.batch_items(bid), 0, -1)]


def source_batch(store: BatchStore, config: BatchConfig | None = None) -> str:
    bid = store.create(config or BatchConfig(max_concurrency=3), created_by="alice")
    store.submit(
        bid,
        [
            BatchLine(1, "a", Content.from_text("first")),
            BatchLine(2, "line-2", error="line 2: not JSON"),
            BatchLine(3, "c", Content.from_text("third"), options=NONE),
        ],
    )
    store.finish_submission(bid)
    return bid


def test_a_rerun_has_the_same_inputs_and_links_to_its_source(
    store: BatchStore, agents: AgentStore
) -> None:
    source = source_batch(store)
    changes = RerunChanges(model="scripted-other", model_settings=ModelSettings(seed=7))
    bid, report = BatchRerun(store, agents).rerun(source, changes, created_by="bob")
    assert (report.submitted, report.invalid) == (2, [(2, "line 2: not JSON")])
    info = store.info(bid)
    assert info.source == source and store.info(source).source == ""
    assert info.config.max_concurrency == 3 and info.total == 3
    config = info.config.conversation
    assert (config.model, config.model_settings.seed) == ("scripted-other", 7)
    assert (config.batch_id, config.submitted_by) == (bid, "bob")
    assert store.created_by(bid) == "bob"
    found = items(store, bid)
    assert [(i["line"], i["id"], i["error"]) for i in found] == [
        (1, "a", ""), (2, "line-2", "line 2: not JSON"), (3, "c", "")
    ]  # fmt: skip
    turns = [store.conversations.turn(i["conversation_id"], i["turn_id"]) for i in found[::2]]
    assert [t.prompt.text for t in turns] == ["first", "third"]
    assert turns[1].options.tool_selection is ToolSelection.NONE
    assert {i["conversation_id"] for i in found}.isdisjoint(
        {i["conversation_id"] for i in items(store, source)}
    )


def test_a_rerun_as_another_version_of_the_sources_agent(
    store: BatchStore, agents: AgentStore
) -> None:
    agents.create(NewAgent(name="triage", system_prompt="v1"), actor="op")
    agents.update("triage", AgentSpec(system_prompt="v2", model="scripted-v2"), actor="op")
    first = resolve_options(
        ConversationOptions(agent="triage", agent_version=1),
        store.settings,
        policy_may_loosen=False,
        agents=agents,
    )
    source = source_batch(store, BatchConfig(conversation=first))
    rerun = BatchRerun(store, agents)
    bid, _ = rerun.rerun(source, RerunChanges(agent_version=2))
    config = store.info(bid).config.conversation
    assert (config.agent, config.agent_version, config.system_prompt) == ("triage", 2, "v2")
    assert config.model == "scripted-v2"
    with pytest.raises(InvalidInput, match="an agent decides its provider and model"):
        rerun.rerun(source, RerunChanges(agent="triage", model="x"))
    with pytest.raises(InvalidInput, match="there is no agent named 'nope'"):
        rerun.rerun(source, RerunChanges(agent="nope"))


def test_what_a_rerun_refuses(store: BatchStore, agents: AgentStore) -> None:
    source = source_batch(store)
    rerun = BatchRerun(store, agents)
    with pytest.raises(InvalidInput, match="the source ran as no agent"):
        rerun.rerun(source, RerunChanges(agent_version=2))
    with pytest.raises(InvalidInput, match=r"model_settings\.temperature: provider 'scripted'"):
        rerun.rerun(source, RerunChanges(model_settings=ModelSettings(temperature=0.5)))
    with pytest.raises(Conflict, match="is not a re-run of"):
        rerun.rerun(source, RerunChanges(), batch_id=source)
    other = source_batch(store)
    with pytest.raises(Conflict, match="is not a re-run of"):
        rerun.rerun(source, RerunChanges(), batch_id=other)
    assert store.ids(limit=10) == [other, source]  # nothing made


def test_the_same_id_again_goes_on_and_submits_nothing_twice(
    store: BatchStore, agents: AgentStore
) -> None:
    source = source_batch(store)
    rerun = BatchRerun(store, agents)
    bid, _ = rerun.rerun(source, RerunChanges(), batch_id="again")
    assert bid == "again"
    _, report = rerun.rerun(source, RerunChanges(), batch_id="again")
    assert (report.submitted, report.skipped) == (0, 3) and store.info(bid).total == 3
