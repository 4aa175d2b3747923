"""Outbound webhooks and inbound triggers against real processes: a Celery worker sends
signed deliveries to a receiver on a loopback socket, retries them with backoff, logs every
attempt; a failed delivery is re-sent from the CLI; a trigger's event runs its agent."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from shared.client import Client
from shared.client.broker import BrokerKind, broker_kind
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.agents import NewAgent
from shared.models.batches import BatchConfig, RetryFilter
from shared.models.config import ConversationConfig
from shared.models.content import Content
from shared.models.events import ConversationStatus, FailedEvent
from shared.models.notifications import Deny
from shared.models.webhooks import DeliveryStatus, EndpointRequest, WebhookEndpoint
from shared.settings import Settings
from shared.store.batch_retry import BatchRetry
from shared.store.batches import BatchLine
from shared.store.triggers import TriggerStore
from shared.store.webhook_log import DeliveryLog
from shared.store.webhooks import EndpointStore
from shared.webhooks.signing import new_secret, signed_headers
from tests.stack import WorkerProcess, parked
from tests.web.conftest import services_of, wait_for, web_settings
from tests.webhook_receiver import Receiver
from webui import create_app

PUBLIC = "https://signoff.example.test"
BACKOFF_S = 0.2
GRACE_S = 1.0
EMAIL = 'call send_email {"to": "ops@example.com", "subject": "Report", "body": "Numbers."}'


@pytest.fixture(scope="module")
def stack_env(stack_env: dict[str, str]) -> dict[str, str]:
    """This module's worker retries quickly: 0.2 s, then 0.4 s; three attempts at most; a
    retry overdue by 1 s was lost, and is swept up."""
    return {
        **stack_env,
        "SIGNOFF_WEBHOOK_BACKOFF_S": str(BACKOFF_S),
        "SIGNOFF_WEBHOOK_MAX_ATTEMPTS": "3",
        "SIGNOFF_WEBHOOK_RETRY_GRACE_S": str(GRACE_S),
        "SIGNOFF_PUBLIC_URL": PUBLIC,
        "SIGNOFF_OUTBOUND_ALLOW": "127.0.0.1",  # the receivers are on loopback
    }


def run_cli(env: dict[str, str], *args: str) -> Result:
    """The `signoff` command in this process (its own processes are tested elsewhere)."""
    return CliRunner().invoke(cli, list(args), env=env)


@pytest.fixture
def endpoints(client: Client) -> Iterator[EndpointStore]:
    store = EndpointStore(client.redis, client.keys)
    yield store
    for endpoint in store.all():
        store.remove(endpoint.id)


def _register(store: EndpointStore, receiver: Receiver, *events: str) -> WebhookEndpoint:
    request = EndpointRequest(url=receiver.url, events=list(events), secret=receiver.secret)  # type: ignore[arg-type]
    return store.add(request, actor="test")


def _log(client: Client) -> DeliveryLog:
    return DeliveryLog(client.redis, client.keys, size=1000)


def test_a_failing_endpoint_gets_signed_retries_until_it_answers_200(
    client: Client, endpoints: EndpointStore
) -> None:
    with Receiver(new_secret(), failures=2).running() as receiver:
        _register(endpoints, receiver, "turn.completed")
        conversation = client.new_conversation()
        turn_id = conversation.send("hello webhooks")
        arrivals = wait_for(
            lambda: (found := receiver.of("turn.completed")) and len(found) >= 3 and found,
            "three attempts of the turn.completed delivery",
        )
    assert [a.status for a in arrivals] == [500, 500, 200]
    assert all(a.verified for a in arrivals)
    assert len({a.msg_id for a in arrivals}) == 1  # one webhook-id across retries
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(arrivals)]
    assert gaps[0] >= BACKOFF_S * 0.9 and gaps[1] >= 2 * BACKOFF_S * 0.9  # doubling backoff
    data = arrivals[-1].body["data"]
    assert data["conversation_id"] == conversation.conversation_id
    assert data["turn_id"] == turn_id
    assert data["response"] == conversation.last_response
    [delivery] = _log(client).recent(endpoint_id=None)
    assert delivery.id == arrivals[0].msg_id
    assert delivery.status is DeliveryStatus.SUCCEEDED
    assert [a.status_code for a in delivery.attempts] == [500, 500, 200]


def test_approval_needed_links_to_its_page_then_its_resolution_follows(
    client: Client, endpoints: EndpointStore
) -> None:
    with Receiver(new_secret()).running() as receiver:
        _register(endpoints, receiver, "approval.needed", "approval.resolved")
        conversation = client.new_conversation(tools={"send_email": "ask"})
        conversation.send(EMAIL)
        [note] = parked(conversation)
        [needed] = wait_for(lambda: receiver.of("approval.needed"), "approval.needed")
        url = f"{PUBLIC}/approvals/{note.id}"
        assert needed.body["data"]["url"] == url
        assert needed.body["data"]["tool"] == "send_email"
        assert url in needed.body["text"]  # what a chat tool's incoming webhook shows
        client.notifications.resolve(note.id, Deny(reason="not today"), actor="ada")
        [resolved] = wait_for(lambda: receiver.of("approval.resolved"), "approval.resolved")
    assert resolved.body["data"]["resolution"] == "deny"
    assert resolved.body["data"]["resolved_by"] == "ada"
    assert resolved.body["data"]["notification_id"] == note.id


def test_a_finished_batch_and_an_expired_approval_are_announced(
    client: Client, endpoints: EndpointStore
) -> None:
    with Receiver(new_secret()).running() as receiver:
        _register(endpoints, receiver, "batch.finished", "approval.expired")
        store = client.stores.batches
        bid = store.create(BatchConfig(conversation=ConversationConfig(), max_concurrency=2))
        lines = [BatchLine(i, f"item-{i}", Content.from_text(f"hello {i}")) for i in range(3)]
        store.submit(bid, lines)
        store.finish_submission(bid)
        [finished] = wait_for(lambda: receiver.of("batch.finished"), "batch.finished")
        assert finished.body["data"]["batch_id"] == bid
        assert finished.body["data"]["status"] == "done"
        assert finished.body["data"]["counts"]["done"] == 3
        conversation = client.new_conversation(tools={"send_email": "ask"}, approval_timeout_s=1)
        conversation.send(EMAIL)
        [note] = parked(conversation)
        wait_for(client.notifications.expire_due, "the approval's deadline")  # what beat runs
        [expired] = wait_for(lambda: receiver.of("approval.expired"), "approval.expired")
        assert store.announce_finished(bid)  # a second announcement is not a second delivery
        wait_for(lambda: conversation.status is ConversationStatus.IDLE, "the turn to go on")
    assert expired.body["data"]["notification_id"] == note.id
    assert expired.body["data"]["status"] == "expired"
    assert len(receiver.of("batch.finished")) == 1


def test_a_retried_batch_is_announced_again_when_it_ends_again(
    client: Client, endpoints: EndpointStore
) -> None:
    with Receiver(new_secret()).running() as receiver:
        _register(endpoints, receiver, "batch.finished")
        store = client.stores.batches
        bid = store.create(BatchConfig(conversation=ConversationConfig(), max_concurrency=2))
        lines = [
            BatchLine(0, "ok", Content.from_text("fine")),
            BatchLine(1, "bad", Content.from_text("please #fail")),
        ]
        store.submit(bid, lines)
        store.finish_submission(bid)
        [first] = wait_for(lambda: receiver.of("batch.finished"), "batch.finished")
        assert BatchRetry(store).retry(bid, RetryFilter()).retried == 1
        ends = lambda: receiver.of("batch.finished")  # noqa: E731
        events = wait_for(lambda: len(ends()) == 2 and ends(), "the second batch.finished")
    assert first.body["data"]["retries"] == 0 and first.body["data"]["counts"]["failed"] == 1
    second = events[1].body["data"]
    assert (second["retries"], second["status"], second["counts"]["failed"]) == (1, "done", 1)
    assert "after retry 1" in second["text"] and len(events) == 2


def test_a_cancelled_batch_is_announced_once_its_items_have_ended(
    client: Client, endpoints: EndpointStore
) -> None:
    with Receiver(new_secret()).running() as receiver:
        _register(endpoints, receiver, "batch.finished")
        store = client.stores.batches
        config = ConversationConfig(tools={"send_email": "ask"})
        bid = store.create(BatchConfig(conversation=config, max_concurrency=1))
        lines = [BatchLine(i, f"item-{i}", Content.from_text(EMAIL)) for i in range(3)]
        store.submit(bid, lines)
        store.finish_submission(bid)
        first = client.conversation(store.conversation_id(bid, "item-0"))
        parked(first)  # one item waits for a person, two wait for it
        assert receiver.of("batch.finished") == []
        store.cancel(bid)
        [finished] = wait_for(lambda: receiver.of("batch.finished"), "batch.finished")
    data = finished.body["data"]
    assert (data["batch_id"], data["status"]) == (bid, "cancelled")
    assert data["counts"]["total"] == 3 and data["counts"]["cancelled"] == 3
    assert finished.verified and "cancelled" in finished.body["text"]


def test_a_failed_turn_is_announced_with_its_error(
    client: Client, endpoints: EndpointStore
) -> None:
    with Receiver(new_secret()).running() as receiver:
        _register(endpoints, receiver, "turn.failed", "turn.completed")
        conversation = client.new_conversation()
        turn_id = conversation.send("this one will #fail")
        [failed] = wait_for(lambda: receiver.of("turn.failed"), "turn.failed")
        assert receiver.of("turn.completed") == []
    assert failed.verified and failed.status == 200
    data = failed.body["data"]
    assert (data["conversation_id"], data["turn_id"]) == (conversation.conversation_id, turn_id)
    assert "scripted failure" in data["error"]
    *_, last = conversation.events(turn_id)
    assert isinstance(last, FailedEvent) and data["error"] == last.error
    assert failed.body["type"] == "turn.failed"
    assert "Turn failed in" in failed.body["text"]


def test_a_retry_lost_with_a_killed_worker_is_swept_up_and_sent(
    client: Client, endpoints: EndpointStore, stack_env: dict[str, str], worker: WorkerProcess
) -> None:
    worker.stop()  # the delivery goes to a worker that waits 5 s before its retry
    doomed = WorkerProcess({**stack_env, "SIGNOFF_WEBHOOK_BACKOFF_S": "5"}, name="doomed")
    try:
        with Receiver(new_secret(), failures=1).running() as receiver:
            _register(endpoints, receiver, "turn.completed")
            doomed.start()
            client.new_conversation().send("a retry to lose")
            [delivery] = wait_for(
                lambda: [d for d in _log(client).recent() if d.next_attempt_at],
                "the first attempt to fail and its retry to wait",
            )
            doomed.kill()  # with the retry's countdown held unacknowledged
            killed_at = time.time()
            assert [a.status for a in receiver.arrivals] == [500]
            worker.start()
            arrivals = wait_for(
                lambda: len(found := receiver.of("turn.completed")) >= 2 and found,
                "the lost retry, swept up",
                timeout_s=60,  # Celery alone would redeliver it after 900 s
            )
            time.sleep(0.5)  # a second copy of the retry, if one were sent, arrives
    finally:
        doomed.kill()
        if worker.process is None:
            worker.start()
    assert [a.status for a in receiver.arrivals] == [500, 200]
    assert arrivals[1].msg_id == delivery.id and arrivals[1].verified
    assert arrivals[1].at - killed_at < 60
    logged = _log(client).get(delivery.id)
    assert logged.status is DeliveryStatus.SUCCEEDED
    assert [a.status_code for a in logged.attempts] == [500, 200]
    # On a Redis broker Celery held the countdown in the killed worker, and the sweep sent it
    # again; on RabbitMQ it waited in the delay queues (the sweep may still send a copy of a
    # retry overdue while the worker restarts: the attempt is made once all the same)
    if broker_kind(client.settings) is not BrokerKind.RABBITMQ:
        assert "was lost" in worker.log()


def test_a_slow_endpoint_never_holds_a_turn_back(client: Client, endpoints: EndpointStore) -> None:
    with Receiver(new_secret()).running() as receiver:
        receiver.hold.clear()  # the endpoint answers nothing until the turns are done
        _register(endpoints, receiver, "turn.completed")
        conversations = [client.new_conversation() for _ in range(3)]
        for conversation in conversations:
            conversation.send("hello")
        for conversation in conversations:
            wait_for(
                lambda c=conversation: c.status is ConversationStatus.IDLE and c.last_response,
                "turns to complete while the endpoint hangs",
            )
        assert receiver.arrivals == []
        receiver.hold.set()
        wait_for(lambda: len(receiver.of("turn.completed")) == 3, "the held deliveries")


def test_a_failed_delivery_is_listed_and_resent_from_the_cli(
    client: Client, endpoints: EndpointStore, stack_env: dict[str, str]
) -> None:
    with Receiver(new_secret(), failures=10).running() as receiver:
        endpoint = _register(endpoints, receiver, "turn.completed")
        client.new_conversation().send("this delivery will fail")
        failed = wait_for(
            lambda: _log(client).recent(status=DeliveryStatus.FAILED), "the delivery to fail"
        )
        assert [a.status_code for a in failed[0].attempts] == [500, 500, 500]
        listed = run_cli(stack_env, "webhook", "deliveries", "--status", "failed")
        assert listed.exit_code == 0, listed.output
        assert failed[0].id in listed.stdout and "last=500" in listed.stdout
        receiver.failures = 0
        resent = run_cli(stack_env, "webhook", "redeliver", failed[0].id)
        assert resent.exit_code == 0, resent.output
        wait_for(
            lambda: _log(client).get(failed[0].id).status is DeliveryStatus.SUCCEEDED,
            "the re-sent delivery to succeed",
        )
    assert [a.status_code for a in _log(client).get(failed[0].id).attempts] == [500, 500, 500, 200]
    missing = run_cli(stack_env, "webhook", "redeliver", "msg_nothing")
    assert missing.exit_code == 2 and "no webhook delivery 'msg_nothing'" in missing.stderr
    assert endpoint.secret not in listed.stdout + resent.stdout


def test_cli_registers_lists_and_removes_endpoints_and_refuses_bad_ones(
    stack_env: dict[str, str], endpoints: EndpointStore
) -> None:
    added = run_cli(
        stack_env, "webhook", "add", "https://hooks.example.test/x", "-e", "turn.failed"
    )
    assert added.exit_code == 0, added.output
    endpoint_id = added.stdout.split()[0]
    assert "secret: whsec_" in added.stdout
    listed = run_cli(stack_env, "webhook", "list")
    assert f"{endpoint_id}  https://hooks.example.test/x  turn.failed" in listed.stdout
    assert "whsec_" not in listed.stdout
    bad = run_cli(stack_env, "webhook", "add", "file:///etc/passwd", "--all-events")
    assert bad.exit_code == 1 and "http:// or https://" in bad.stderr
    none = run_cli(stack_env, "webhook", "add", "https://hooks.example.test/y")
    assert none.exit_code == 1 and "--event" in none.stderr
    removed = run_cli(stack_env, "webhook", "remove", endpoint_id)
    assert removed.exit_code == 0 and endpoint_id in removed.stdout


def test_a_triggered_event_runs_the_agent_once(
    client: Client, stack_env: dict[str, str], redis_server: EmbeddedRedis
) -> None:
    client.stores.agents.create(
        NewAgent(name="triage", system_prompt="You triage issues."), actor="test"
    )
    created = run_cli(
        stack_env,
        "trigger",
        "create",
        "issues",
        "--agent",
        "triage",
        "--template",
        "Triage issue {payload.issue.number}: {payload.issue.title}",
    )
    assert created.exit_code == 0, created.stderr
    secret = created.stdout.split("secret: ")[1].split()[0]
    settings: Settings = web_settings(
        redis_url=redis_server.url, key_prefix=stack_env["SIGNOFF_KEY_PREFIX"]
    )
    app = create_app(settings)
    http = app.test_client()
    body = json.dumps({"issue": {"number": 7, "title": "Crash on start"}})
    headers = signed_headers(secret, "evt-1", int(time.time()), body)
    fired = http.post("/api/v1/triggers/issues", data=body, headers=headers)
    assert fired.status_code == 202, fired.text
    cid = fired.json["conversation_id"]
    conversation = client.conversation(cid)
    wait_for(lambda: conversation.last_response, "the agent's answer")
    record = client.store.get(cid)
    assert record.config.agent == "triage" and record.owner == "trigger:issues"
    assert "Triage issue 7: Crash on start" in conversation.history[0].content
    replayed = http.post("/api/v1/triggers/issues", data=body, headers=headers)
    assert replayed.status_code == 409
    assert cid in replayed.json["error"]["message"]
    services_of(app).close()
    shown = run_cli(stack_env, "trigger", "show", "issues")
    assert "/api/v1/triggers/issues" in shown.stdout and secret not in shown.stdout


def test_trigger_cli_lists_deletes_and_names_bad_definitions(
    client: Client, stack_env: dict[str, str]
) -> None:
    client.stores.agents.create(NewAgent(name="sorter"), actor="test")
    base = ["trigger", "create", "sorting", "--agent", "sorter", "--template"]
    ghost = run_cli(stack_env, "trigger", "create", "t", "--agent", "ghost", "--template", "x")
    assert ghost.exit_code == 2 and "ghost" in ghost.stderr
    bad = run_cli(stack_env, *base, "{payload.a!r}")
    assert bad.exit_code == 1 and "conversion" in bad.stderr
    named = run_cli(stack_env, *base, "{payload.title}", "--description", "sorts things")
    assert named.exit_code == 0, named.output
    listed = run_cli(stack_env, "trigger", "list")
    assert "sorting  agent=sorter  sorts things" in listed.stdout
    assert "whsec_" not in listed.stdout
    again = run_cli(stack_env, *base, "{payload.title}")
    assert again.exit_code == 1 and "exists" in again.stderr
    first = named.stdout.split("secret: ")[1].split()[0]
    rotated = run_cli(stack_env, "trigger", "rotate-secret", "sorting")
    assert rotated.exit_code == 0, rotated.output
    second = rotated.stdout.split("secret: ")[1].split()[0]
    assert second.startswith("whsec_") and second != first
    assert TriggerStore(client.redis, client.keys).get("sorting").secret == second
    ghost_rotation = run_cli(stack_env, "trigger", "rotate-secret", "ghost")
    assert ghost_rotation.exit_code == 2 and "no trigger 'ghost'" in ghost_rotation.stderr
    assert run_cli(stack_env, "trigger", "delete", "sorting").exit_code == 0
    gone = run_cli(stack_env, "trigger", "delete", "sorting")
    assert gone.exit_code == 2 and "no trigger 'sorting'" in gone.stderr
