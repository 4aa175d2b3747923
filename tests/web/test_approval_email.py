"""Approval emails over SMTP against a real worker and a real SMTP server on loopback
(aiosmtpd): a route mails each recipient the request and a signed link that works once, for
that approver only; a failing server is retried and every attempt logged."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiosmtpd.controller import Controller
from flask import Flask

from shared.client import Client
from shared.local.embedded_redis import free_port
from shared.models.routes import EmailRecipient, Route
from shared.models.users import Role
from shared.store.routes import RouteStore
from tests.stack import WorkerProcess
from tests.web.conftest import (
    SECRET,
    bearer,
    form_csrf,
    new_conversation,
    services_of,
    sign_in,
    wait_for,
)

PUBLIC = "http://signoff.example.test"
PASSWORD = "a-long-passphrase"


class Inbox:
    """An aiosmtpd handler keeping every message it accepts; `refuse` answers 451 instead."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.refuse = 0  # how many transactions to refuse (a temporary failure)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.refuse > 0:
            self.refuse -= 1
            return "451 try again later"
        parsed = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append(parsed)
        return "250 OK"


@pytest.fixture(scope="module")
def inbox() -> Iterator[tuple[Inbox, int]]:
    handler, port = Inbox(), free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    yield handler, port
    controller.stop()


@pytest.fixture(scope="module")
def stack_env(stack_env: dict[str, str], inbox: tuple[Inbox, int]) -> dict[str, str]:
    return {
        **stack_env,
        "SIGNOFF_SMTP_HOST": "127.0.0.1",
        "SIGNOFF_SMTP_PORT": str(inbox[1]),
        "SIGNOFF_SMTP_SECURITY": "none",
        "SIGNOFF_SMTP_FROM": "signoff@example.test",
        "SIGNOFF_OUTBOUND_ALLOW": "127.0.0.1",  # the SMTP server is on loopback
        "SIGNOFF_SECRET_KEY": SECRET,  # the web's: links are signed with it
        "SIGNOFF_PUBLIC_URL": PUBLIC,
        "SIGNOFF_WEBHOOK_BACKOFF_S": "0.2",
    }


def _park(app: Flask, operator: dict[str, str], label: str) -> str:
    http = app.test_client()
    cid = new_conversation(http, operator, tools={"calculator": "ask"}, labels=[label])
    text = 'call calculator {"expression": "7*6"}'
    sent = http.post(f"/api/v1/conversations/{cid}/prompts", json={"text": text}, headers=operator)
    assert sent.status_code == 202, sent.text
    url = f"/api/v1/notifications?conversation_id={cid}"
    return str(wait_for(lambda: http.get(url, headers=operator).json["items"], "a call")[0]["id"])


def _text(message: EmailMessage) -> str:
    return str(message.get_content())


def _mail_to(inbox: Inbox, address: str, nid: str) -> EmailMessage:
    def found() -> EmailMessage | None:
        for message in inbox.messages:
            if message["To"] == address and nid in _text(message):
                return message
        return None

    return wait_for(found, f"the email to {address}", timeout_s=20)


def test_a_route_mails_each_approver_a_link_that_works_once(
    stack_app: Flask, worker: WorkerProcess, client: Client, inbox: tuple[Inbox, int]
) -> None:
    handler, _ = inbox
    svc = services_of(stack_app)
    operator = bearer(svc.tokens.create("mail-op", Role.OPERATOR))
    for name in ("rae", "sol"):
        svc.users.add(name, PASSWORD, role=Role.APPROVER)
    recipients = [
        EmailRecipient(approver="rae", address="rae@example.test"),
        EmailRecipient(approver="sol", address="sol@example.test"),
    ]
    RouteStore(client.redis, client.keys).add(Route(name="fin", label="finance", email=recipients))
    started = time.monotonic()
    nid = _park(stack_app, operator, "finance")
    mail = _mail_to(handler, "rae@example.test", nid)
    print(f"request parked -> email accepted: {time.monotonic() - started:.2f} s")
    assert mail["From"] == "signoff@example.test"
    assert mail["Subject"].startswith("Approval needed")
    body = _text(mail)
    assert "calculator" in body and "7*6" in body
    link = re.search(rf"{re.escape(PUBLIC)}/approve/\S+", body)
    assert link is not None
    path = urlsplit(link[0]).path
    sol_mail = _mail_to(handler, "sol@example.test", nid)
    assert path not in _text(sol_mail)  # each approver has a link of their own

    other = stack_app.test_client()
    assert sign_in(other, "sol", PASSWORD).status_code == 302
    assert other.get(path).status_code == 403  # rae's link is not sol's
    rae = stack_app.test_client()
    assert sign_in(rae, "rae", PASSWORD).status_code == 302
    page = rae.get(path)
    assert page.status_code == 200 and client.notifications.get(nid).status.value == "pending"
    decided = rae.post(path, data={"decision": "allow", "csrf_token": form_csrf(page.text)})
    assert decided.status_code == 302
    assert client.notifications.get(nid).resolved_by == "rae"
    again = rae.post(path, data={"decision": "allow", "csrf_token": form_csrf(page.text)})
    assert again.status_code == 409

    unrouted = _park(stack_app, operator, "ops")  # no route matches: no email
    time.sleep(1.0)
    assert not [m for m in handler.messages if unrouted in _text(m)]


def test_a_refused_email_is_retried_and_logged(
    stack_app: Flask, worker: WorkerProcess, client: Client, inbox: tuple[Inbox, int]
) -> None:
    handler, _ = inbox
    svc = services_of(stack_app)
    operator = bearer(svc.tokens.create("mail-op2", Role.OPERATOR))
    route = Route(
        name="ops-retry",
        label="retry",
        email=[EmailRecipient(approver="tia", address="tia@example.test")],
    )
    RouteStore(client.redis, client.keys).add(route)
    handler.refuse = 2
    nid = _park(stack_app, operator, "retry")
    _mail_to(handler, "tia@example.test", nid)

    def logged() -> list[str] | None:  # the task logs once the server has taken the email
        log = client.redis.xrange(client.keys.route_log())
        outcomes = [f["outcome"] for _, f in log if f["notification_id"] == nid]
        return outcomes if len(outcomes) >= 3 else None

    outcomes = wait_for(logged, "the third delivery's log row", timeout_s=10)
    assert len(outcomes) == 3 and outcomes[-1] == "sent", outcomes
    assert all(o.startswith("failed: SMTPDataError") for o in outcomes[:2])
    assert sum(1 for m in handler.messages if nid in _text(m)) == 1  # sent once


def test_an_escalation_is_sent_once_by_many_notifiers(
    stack_app: Flask,
    stack_env: dict[str, str],
    worker: WorkerProcess,
    client: Client,
    inbox: tuple[Inbox, int],
) -> None:
    """Two worker processes (four notifier threads) poll the escalations: the boss gets one
    email per escalated request, and none for a request decided before its escalation."""
    handler, _ = inbox
    second = WorkerProcess(stack_env, name="w2").start()
    try:
        svc = services_of(stack_app)
        operator = bearer(svc.tokens.create("esc-op", Role.OPERATOR))
        routes = RouteStore(client.redis, client.keys)
        boss = EmailRecipient(approver="ada", address="boss@example.test")
        routes.add(Route(name="boss", email=[boss], escalation_only=True))
        first = [EmailRecipient(approver="pia", address="pia@example.test")]
        routes.add(
            Route(name="esc", label="esc", email=first, escalate_after_s=2, escalate_to="boss")
        )
        late = _park(stack_app, operator, "esc")
        decided = _park(stack_app, operator, "esc")
        _mail_to(handler, "pia@example.test", decided)
        client.notifications.resolve(decided, {"kind": "allow"}, actor="pia")
        _mail_to(handler, "boss@example.test", late)
        time.sleep(3.0)  # every notifier has polled many times since
        to_boss = [m for m in handler.messages if m["To"] == "boss@example.test"]
        assert sum(1 for m in to_boss if late in _text(m)) == 1
        assert not [m for m in to_boss if decided in _text(m)]
        assert client.redis.zcard(client.keys.route_escalations()) == 0
    finally:
        second.stop()
