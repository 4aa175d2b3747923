"""The route tasks on the webhook delivery worker, and the route notifier thread: an email
(`signoff.route.email`) or a Slack post (`signoff.route.slack`) is attempted, logged, and
retried with the webhook backoff (SIGNOFF_WEBHOOK_BACKOFF_S doubling, at most
SIGNOFF_WEBHOOK_MAX_ATTEMPTS attempts)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
from celery import Celery

from shared.approval_links import ApprovalLinks
from shared.client.broker import countdown_for
from shared.client.tasks import webhook_queue_name
from shared.errors import NotFound, ProviderError
from shared.metrics.series import NOTIFICATION_DELIVERIES
from shared.models.notifications import Notification, NotificationStatus
from shared.models.routes import EmailRecipient
from shared.settings import Settings
from shared.slack import SlackApi, outcome_text
from shared.store.connection import connect
from shared.store.keys import KeySpace
from shared.store.notifications import NotificationStore
from worker.routes.email import approval_message, send_message
from worker.routes.notifier import RouteNotifier, RouteNotifierStep
from worker.webhooks.delivery import backoff_s

__all__ = ["EMAIL_APPROVAL", "POST_SLACK", "UPDATE_SLACK", "register_routes"]

log = logging.getLogger(__name__)

EMAIL_APPROVAL = "signoff.route.email"
POST_SLACK = "signoff.route.slack"
UPDATE_SLACK = "signoff.route.slack_update"
LOG_MAXLEN = 10_000
_ERROR_CHARS = 300
_SLACK_KEEP_S = 30 * 86_400


@dataclass(frozen=True)
class _Sender:
    """What the tasks share: the stores, the settings, and the attempt log."""

    client: redis.Redis
    keys: KeySpace
    settings: Settings

    def pending(self, nid: str, route: str, to: str, attempt: int) -> Notification | None:
        """The notification if it still waits (else the skip is logged), None otherwise."""
        try:
            note = NotificationStore(self.client, self.keys, self.settings).get(nid)
        except NotFound:
            return None
        if note.status is not NotificationStatus.PENDING:
            self.log(nid, route, to, attempt, f"skipped: {note.status.value}")
            return None
        return note

    def log(self, nid: str, route: str, to: str, attempt: int, outcome: str) -> None:
        """Logs an attempt (`sent`, `failed: ...`, `skipped: ...`) and counts it."""
        channel = "slack" if to.startswith("slack:") else "email"
        NOTIFICATION_DELIVERIES.labels(channel, outcome.partition(":")[0]).inc()
        fields = {
            "notification_id": nid,
            "route": route,
            "to": to,
            "attempt": str(attempt),
            "outcome": outcome[:_ERROR_CHARS],
            "at": repr(time.time()),
        }
        self.client.xadd(self.keys.route_log(), fields, maxlen=LOG_MAXLEN, approximate=True)  # type: ignore[arg-type]

    def failed(self, nid: str, route: str, to: str, attempt: int, error: str) -> float | None:
        """Logs a failed attempt; returns the wait before the next, None after the last."""
        self.log(nid, route, to, attempt, f"failed: {error}")
        log.warning("approval %s to %s, attempt %d: %s", nid, to, attempt, error)
        if attempt >= self.settings.webhook_max_attempts:
            return None
        return backoff_s(self.settings, attempt)

    def email(self, nid: str, route: str, to: EmailRecipient) -> None:
        """Mails `to` the request and a signed link of theirs; raises on any failure."""
        note = NotificationStore(self.client, self.keys, self.settings).get(nid)
        if not self.settings.smtp_host:
            raise RuntimeError("SIGNOFF_SMTP_HOST is not set")
        links = ApprovalLinks(self.client, self.keys, self.settings)
        token = links.token(nid, to.approver, expires_in_s=self.settings.approval_link_ttl_s)
        link = links.url(token)
        message = approval_message(note, to=to.address, sender=self.settings.smtp_from, link=link)
        send_message(self.settings, message)

    def update_slack(self, nid: str) -> None:
        """Updates every Slack message about `nid` with its outcome, or who allowed so far."""
        try:
            note = NotificationStore(self.client, self.keys, self.settings).get(nid)
        except NotFound:
            return
        posted: dict[str, str] = self.client.hgetall(self.keys.slack_messages(nid))  # type: ignore[assignment]
        api = SlackApi(self.settings)
        try:
            for channel, ts in posted.items():
                api.update(channel, ts, outcome_text(note))
        except ProviderError as exc:  # the decision stands; the message lags
            log.warning("slack update of %s: %s", nid, exc)
        finally:
            api.close()


def register_routes(app: Celery, settings: Settings) -> None:
    """Adds the route tasks and, to every worker this app runs, a route notifier thread."""
    sender = _Sender(connect(settings), KeySpace.of(settings), settings)
    queue = webhook_queue_name(settings)

    @app.task(name=EMAIL_APPROVAL, ignore_result=True)
    def email(nid: str, route: str, recipient: dict[str, str], attempt: int = 1) -> None:
        """One attempt to mail one recipient a request."""
        to = EmailRecipient.model_validate(recipient)
        if sender.pending(nid, route, to.address, attempt) is None:
            return
        try:
            sender.email(nid, route, to)
        except Exception as exc:
            wait = sender.failed(nid, route, to.address, attempt, f"{type(exc).__name__}: {exc}")
            if wait is not None:
                again = (nid, route, recipient, attempt + 1)
                email.apply_async(again, countdown=countdown_for(settings, wait), queue=queue)
            return
        sender.log(nid, route, to.address, attempt, "sent")
        log.info("approval email %s sent to %s (route %s)", nid, to.address, route)

    @app.task(name=POST_SLACK, ignore_result=True)
    def slack(nid: str, route: str, channel: str, attempt: int = 1) -> None:
        """One attempt to post a request to a Slack channel."""
        note = sender.pending(nid, route, f"slack:{channel}", attempt)
        if note is None:
            return
        api = SlackApi(settings)
        try:
            posted, ts = api.post_request(channel, note)
        except ProviderError as exc:
            wait = sender.failed(nid, route, f"slack:{channel}", attempt, exc.message)
            if wait is not None:
                again = (nid, route, channel, attempt + 1)
                slack.apply_async(again, countdown=countdown_for(settings, wait), queue=queue)
            return
        finally:
            api.close()
        messages = sender.keys.slack_messages(nid)
        sender.client.hset(messages, posted, ts)
        sender.client.expire(messages, _SLACK_KEEP_S)
        sender.log(nid, route, f"slack:{channel}", attempt, "sent")

    @app.task(name=UPDATE_SLACK, ignore_result=True)
    def slack_update(nid: str) -> None:
        """Every Slack message about `nid` shows its outcome (it was decided anywhere)."""
        sender.update_slack(nid)

    def first(task: Callable[..., object]) -> Callable[..., None]:
        return lambda *args: task.apply_async(args, queue=queue)  # type: ignore[attr-defined]

    def notifier() -> RouteNotifier:
        own = connect(settings)  # its own connection: it blocks on the stream
        send_email, send_slack = first(email), first(slack)
        return RouteNotifier(
            own,
            sender.keys,
            settings,
            lambda nid, route, to: send_email(nid, route, to.model_dump()),
            send_slack,
            first(slack_update),
        )

    app.signoff_route_notifier = notifier
    app.steps["worker"].add(RouteNotifierStep)
