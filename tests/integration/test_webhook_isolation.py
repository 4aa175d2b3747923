"""A slow webhook endpoint never slows a turn, on the default `signoff worker` (both queues).

The endpoint holds every request past the delivery timeout; a batch of quick items makes
a delivery each, enough to fill every one of the worker's threads were deliveries to share
them with turns. A calculator turn started then still finishes in well under a second.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from shared.client import Client
from shared.models.content import Content
from shared.models.webhooks import EndpointRequest, WebhookEventKind
from shared.store.batches import BatchConfig, BatchLine, BatchStatus, BatchStore
from shared.store.webhook_log import DeliveryLog
from shared.store.webhooks import EndpointStore
from shared.webhooks.signing import new_secret
from tests.web.conftest import wait_for
from tests.webhook_receiver import Receiver

TIMEOUT_S = 2.0
ITEMS = 8


@pytest.fixture(scope="module")
def stack_env(stack_env: dict[str, str]) -> dict[str, str]:
    return {
        **stack_env,
        "SIGNOFF_WEBHOOK_TIMEOUT_S": str(TIMEOUT_S),
        "SIGNOFF_WEBHOOK_MAX_ATTEMPTS": "1",
        "SIGNOFF_OUTBOUND_ALLOW": "127.0.0.1",  # the receiver is on loopback
    }


@pytest.fixture
def slow_endpoint(client: Client) -> Iterator[Receiver]:
    """An endpoint for turn.completed that answers nothing until the test ends."""
    with Receiver(new_secret()).running() as receiver:
        receiver.hold.clear()
        request = EndpointRequest(
            url=receiver.url, events=[WebhookEventKind.TURN_COMPLETED], secret=receiver.secret
        )
        EndpointStore(client.redis, client.keys).add(request, actor="test")
        yield receiver


def test_a_calculator_turn_is_not_slowed_by_a_slow_endpoint(
    client: Client, slow_endpoint: Receiver
) -> None:
    store = BatchStore(client.redis, client.keys, client.settings, client.tasks)
    bid = store.create(BatchConfig(max_concurrency=ITEMS))
    store.submit(
        bid, [BatchLine(i, f"q{i}", Content.from_text(f"quick {i}")) for i in range(ITEMS)]
    )
    store.finish_submission(bid)
    wait_for(lambda: store.info(bid).status is BatchStatus.DONE, "the quick batch")
    log = DeliveryLog(client.redis, client.keys, size=100)
    wait_for(lambda: len(log.recent(endpoint_id=None)) >= ITEMS, "the batch's deliveries")
    time.sleep(0.3)  # the deliveries' tasks are taken and their requests are held
    conversation = client.new_conversation()
    started = time.monotonic()
    response = conversation.chat_to_completion('call calculator {"expression": "6*7"}')
    elapsed = time.monotonic() - started
    assert "42" in (response.text or ""), response
    assert elapsed < 0.8, f"the turn took {elapsed:.2f} s"
    pending = [d for d in log.recent(endpoint_id=None) if not d.attempts]
    assert pending, "every delivery was already over: the endpoint did not hold them"
