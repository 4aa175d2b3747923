"""The claim brings a new turn's context window (worker/lua/claim.lua), on a real Redis.

A later turn of a conversation used to read its window in a round trip of its own before
its first model call. The claim now reads it in the same script; these tests check that it
is the window the history's own script reads, that a turn under way still reads its own,
and that the model is sent the same context either way.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.client import Client
from shared.models.steps import Step, StepSource, StepType
from shared.settings import Settings
from shared.store.history import HistoryStore
from worker import turn as turn_module
from worker.providers.base import Message
from worker.runtime import Runtime


@pytest.fixture
def own(stack_env: dict[str, str]) -> Iterator[tuple[Client, Runtime]]:
    """A client and a runtime of their own key prefix: no worker of the stack takes its legs."""
    settings = Settings(redis_url=stack_env["SIGNOFF_REDIS_URL"], key_prefix="claimwin")
    with Client(settings) as client:
        yield client, Runtime(client.settings, client.redis, send_advance=lambda cid: None)


def _step(n: int, kind: StepType = StepType.TEXT_RESPONSE) -> Step:
    source = StepSource.SYSTEM if kind is StepType.COMPACTION else StepSource.MODEL
    return Step(id=f"s{n}", type=kind, source=source, content=f"text {n}")


def test_the_claimed_window_is_the_one_the_history_reads(own: tuple[Client, Runtime]) -> None:
    client, runtime = own
    cid = client.new_conversation().conversation_id
    store = HistoryStore(client.redis, client.keys, cid, max_history_size=0)
    for n in range(3):
        store.append(_step(n), start_turn=True)
    store.append(_step(3, StepType.COMPACTION))
    store.append(_step(4), start_turn=True)
    client.conversation(cid).send("next")

    claim = runtime._claim(cid, "")
    assert claim[0] == "ok"
    appended = int(claim[5])
    claimed = store.parse_window(*claim[10])
    assert [s.id for s in claimed] == ["s3", "s4"]  # from the last compaction on
    assert [s.id for s in claimed] == [s.id for s in store.context_window(appended)]


def test_a_turn_under_way_reads_its_window_itself(own: tuple[Client, Runtime]) -> None:
    client, runtime = own
    conversation = client.new_conversation()
    cid = conversation.conversation_id
    HistoryStore(client.redis, client.keys, cid).append(_step(0), start_turn=True)
    tid = conversation.send("next")
    client.redis.hset(client.keys.turn(cid, tid), "checkpoint", '{"turn_start": 1}')

    claim = runtime._claim(cid, "")
    assert claim[0] == "ok" and claim[2] == tid
    assert claim[10] == []  # its checkpoint names where it starts: the leg reads the window


def test_a_later_turn_sends_the_model_the_whole_context_without_a_read(
    own: tuple[Client, Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, runtime = own
    conversation = client.new_conversation()
    cid = conversation.conversation_id
    conversation.send("the first prompt")
    assert runtime.advance(cid) == "finished"

    reads: list[int] = []
    context_window = HistoryStore.context_window

    def counted(store: HistoryStore, turn_start: int) -> list[Step]:
        reads.append(turn_start)
        return context_window(store, turn_start)

    sent: list[tuple[Message, ...]] = []
    build_messages = turn_module.build_messages

    def kept(*args: object, **kwargs: object) -> tuple[Message, ...]:
        messages = build_messages(*args, **kwargs)  # type: ignore[arg-type]
        sent.append(messages)
        return messages

    monkeypatch.setattr(HistoryStore, "context_window", counted)
    monkeypatch.setattr(turn_module, "build_messages", kept)
    conversation.send("the second prompt")
    assert runtime.advance(cid) == "finished"

    assert reads == []
    contents = [m.content for m in sent[-1]]
    assert contents[0] == "the first prompt" and contents[-1] == "the second prompt"
    assert len(contents) == 3 and contents[1].startswith("[demo model]")
