"""The home page's recent failures come from the failures index the worker's flush keeps.

They were found by scanning the newest 1,000 conversations by creation, so a long-lived
conversation (a background agent's, a schedule's `continue` run) that failed today was
missing from the page once 1,000 newer ones existed.
"""

from __future__ import annotations

import pytest

from shared.client import Client
from shared.errors import TurnFailed
from webui.home import FAILURES_SHOWN, home_view
from webui.services import build_services

NEWER = 1_100  # conversations created after the old one: more than the old scan read


def fail(client: Client, cid: str, prompt: str) -> None:
    conversation = client.conversation(cid)
    with pytest.raises(TurnFailed, match="scripted failure"):
        conversation.wait_for_turn(conversation.send(f"{prompt} #fail"), timeout=30)


def test_a_failure_in_an_old_conversation_is_on_the_home_page(client: Client) -> None:
    old = client.new_conversation()
    recovered = client.new_conversation()
    for _ in range(NEWER):
        client.new_conversation()
    fail(client, recovered.conversation_id, "first try")
    recovered.wait_for_turn(recovered.send("second try, fine"), timeout=30)
    fail(client, old.conversation_id, "the old one fails today")

    services = build_services(client.settings)
    try:
        failures = home_view(services).failures
    finally:
        services.close()
    assert failures[0].conversation_id == old.conversation_id  # the newest failure
    assert failures[0].title == "the old one fails today #fail"
    assert recovered.conversation_id not in [r.conversation_id for r in failures]


def test_the_home_page_shows_the_newest_failures_first_and_no_more_than_its_share(
    client: Client,
) -> None:
    failed = [client.new_conversation().conversation_id for _ in range(FAILURES_SHOWN + 2)]
    for n, cid in enumerate(failed):
        fail(client, cid, f"failure {n}")
    services = build_services(client.settings)
    try:
        shown = [r.conversation_id for r in home_view(services).failures]
    finally:
        services.close()
    assert shown == failed[::-1][:FAILURES_SHOWN]
