"""A prompt and its `advance` are one write: the submit script pushes the task itself."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
import redis

from shared.client import Client
from shared.errors import ConversationClosed
from shared.settings import Settings


def queued_for(client: Client) -> list[str]:
    """The conversation ids of the `advance` tasks waiting on the turns queue, oldest first."""
    raw = client.redis.lrange(client.tasks.messages.key, 0, -1)
    bodies = [json.loads(base64.b64decode(json.loads(m)["body"])) for m in reversed(raw)]
    return [args[0] for args, _kwargs, _embed in bodies]


def test_each_prompt_queues_exactly_one_advance_and_a_refused_one_none(
    real_redis: redis.Redis, settings: Settings
) -> None:
    own = settings.model_copy(update={"key_prefix": f"sq{uuid.uuid4().hex[:6]}"})
    with Client(own) as client:  # no worker: what the sends queued stays on the queue

        def no_second_write(conversation_id: str) -> None:
            raise AssertionError(f"advance for {conversation_id} sent apart from its prompt")

        client.tasks.advance = no_second_write  # type: ignore[method-assign]
        conversation = client.new_conversation()
        conversation.send("first")
        conversation.send("second")
        assert queued_for(client) == [conversation.conversation_id] * 2
        conversation.close(timeout=0)
        with pytest.raises(ConversationClosed):
            conversation.send("after close")
        assert queued_for(client) == [conversation.conversation_id] * 2
        [message] = client.redis.lrange(client.tasks.messages.key, 0, 0)
        assert json.loads(message)["headers"]["task"] == "signoff.advance"
