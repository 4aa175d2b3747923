"""The Redis history store against the reference model, on a real redis-server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.local.embedded_redis import EmbeddedRedis
from shared.models.steps import Step, StepSource, StepTarget, StepType, UsageMetadata
from shared.store.history import HistoryStore
from shared.store.keys import KeySpace
from tests.reference_history import ReferenceHistory

KEYS = KeySpace(prefix="model")

steps_strategy = st.builds(
    Step,
    id=st.text(alphabet="abc", max_size=3),
    type=st.sampled_from(list(StepType)),
    source=st.sampled_from(list(StepSource)),
    target=st.sampled_from(list(StepTarget)),
    content=st.text(max_size=8),
    is_complete_response=st.sampled_from([None, True, False]),
    structured_output=st.one_of(
        st.none(), st.integers(), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
    ),
)
usage_strategy = st.builds(
    UsageMetadata,
    prompt_token_count=st.integers(0, 1000),
    candidates_token_count=st.integers(0, 1000),
    total_token_count=st.integers(0, 2000),
    cached_content_token_count=st.integers(0, 50),
    thoughts_token_count=st.integers(0, 50),
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(steps_strategy, min_size=1, max_size=4)),
        st.tuples(st.just("start_turn"), st.none()),
        st.tuples(st.just("add_usage"), usage_strategy),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=40,
)
limits = st.sampled_from([None, 0, 1, 2, 3, 5, 8])


@pytest.fixture(scope="module")
def backend(request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    server: EmbeddedRedis = request.getfixturevalue("redis_server")
    client = redis.Redis.from_url(server.url, decode_responses=True)
    yield client
    client.close()


def assert_same(store: HistoryStore, reference: ReferenceHistory) -> None:
    snapshot = store.snapshot()
    assert snapshot.steps == reference.steps
    assert snapshot.turn_start_indices == reference.turn_start_indices
    assert snapshot.turn_count == reference.turn_count
    assert snapshot.compaction_indices == reference.compaction_indices
    assert snapshot.cumulative_usage == reference.cumulative_usage
    assert snapshot.turn_usage == reference.turn_usage
    assert snapshot.last_response == reference.last_response
    assert snapshot.last_structured_output == reference.last_structured_output


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations, limit=limits)
def test_store_matches_reference(backend: redis.Redis, ops: list, limit: int | None) -> None:
    store = HistoryStore(backend, KEYS, uuid.uuid4().hex, max_history_size=limit)
    reference = ReferenceHistory(max_history_size=limit)
    for name, arg in ops:
        if name == "append":
            store.append(*arg)
            reference.append(arg)
        elif name == "start_turn":
            store.start_turn()
            reference.start_turn()
        elif name == "add_usage":
            store.add_usage(arg)
            reference.add_usage(arg)
        else:
            store.clear()
            reference.clear()
        assert_same(store, reference)


def test_default_limit_is_ten_thousand(real_redis: redis.Redis) -> None:
    store = HistoryStore(real_redis, KEYS, "c1")
    step = Step(type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, content="x")
    store.append(*([step] * 10_005))
    snapshot = store.snapshot()
    assert len(snapshot.steps) == 10_000
    assert snapshot.trimmed == 5
