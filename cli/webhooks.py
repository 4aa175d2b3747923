"""`signoff webhook`: endpoints that receive events, and the delivery log (re-sendable)."""

from __future__ import annotations

import getpass
import time

import click
from pydantic import ValidationError

from shared.client import Client
from shared.errors import InvalidInput
from shared.models.webhooks import (
    DeliveryStatus,
    EndpointRequest,
    WebhookDelivery,
    WebhookEventKind,
)
from shared.outbound import OutboundPolicy
from shared.store.webhook_log import DeliveryLog
from shared.store.webhooks import EndpointStore

__all__ = ["webhook"]

_EVENTS = click.Choice([kind.value for kind in WebhookEventKind])
_STATUSES = click.Choice([status.value for status in DeliveryStatus])


def _log(client: Client) -> DeliveryLog:
    return DeliveryLog(client.redis, client.keys, size=client.settings.webhook_log_size)


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(stamp)) + "Z"


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'endpoint'}: {e['msg']}" for e in exc.errors()
    )


@click.group()
def webhook() -> None:
    """Endpoints that receive signed events (approval needed, turn completed, ...)."""


@webhook.command("add")
@click.argument("url")
@click.option(
    "--event", "-e", "events", multiple=True, type=_EVENTS, help="An event to send (repeat)."
)
@click.option("--all-events", is_flag=True, help="Every event.")
@click.option("--description", default="", help="What the endpoint is, for the list.")
@click.option("--secret", help="A whsec_<base64> secret to sign with (default: a new one).")
def add(
    url: str, events: tuple[str, ...], all_events: bool, description: str, secret: str | None
) -> None:
    """Register URL for events; prints the endpoint's id and its signing secret (once)."""
    chosen = [kind.value for kind in WebhookEventKind] if all_events else list(events)
    if not chosen:
        raise InvalidInput("name the events to send: --event approval.needed ... or --all-events")
    try:
        request = EndpointRequest(url=url, events=chosen, description=description, secret=secret)
    except ValidationError as exc:
        raise InvalidInput(_problems(exc)) from None
    with Client() as client:
        outbound = OutboundPolicy(client.settings.outbound_allow)
        endpoint = EndpointStore(client.redis, client.keys, outbound=outbound).add(
            request, actor=f"cli:{getpass.getuser()}"
        )
    click.echo(f"{endpoint.id} {endpoint.url}")
    click.echo(f"events: {', '.join(kind.value for kind in endpoint.events)}")
    click.echo(f"secret: {endpoint.secret}  (shown once: verify webhook-signature with it)")


@webhook.command("list")
def list_() -> None:
    """Every endpoint: id, URL, events."""
    with Client() as client:
        found = EndpointStore(client.redis, client.keys).all()
    if not found:
        click.echo("no webhook endpoints (add one: signoff webhook add URL --event ...)")
    for endpoint in found:
        kinds = ",".join(kind.value for kind in endpoint.events)
        click.echo(f"{endpoint.id}  {endpoint.url}  {kinds}  {endpoint.description}".rstrip())


@webhook.command("remove")
@click.argument("endpoint_id")
def remove(endpoint_id: str) -> None:
    """Remove an endpoint; its pending deliveries fail."""
    with Client() as client:
        removed = EndpointStore(client.redis, client.keys).remove(endpoint_id)
    click.echo(f"removed {removed.id} {removed.url}")


def _describe(delivery: WebhookDelivery) -> str:
    last = delivery.attempts[-1] if delivery.attempts else None
    outcome = "-" if last is None else str(last.status_code or last.error)
    return (
        f"{delivery.id}  {_when(delivery.created_at)}  {delivery.endpoint_id}  "
        f"{delivery.event_type.value:<18} {delivery.status.value:<9} "
        f"attempts={len(delivery.attempts)} last={outcome}"
    )


@webhook.command("deliveries")
@click.option("--endpoint", "endpoint_id", help="Only this endpoint's deliveries.")
@click.option("--status", type=_STATUSES, help="Only in this status (failed: to re-send).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500))
@click.option("--attempts", "show_attempts", is_flag=True, help="Each attempt too.")
def deliveries(
    endpoint_id: str | None, status: str | None, limit: int, show_attempts: bool
) -> None:
    """The delivery log, newest first."""
    with Client() as client:
        found = _log(client).recent(
            limit=limit,
            endpoint_id=endpoint_id,
            status=DeliveryStatus(status) if status else None,
        )
    for delivery in found:
        click.echo(_describe(delivery))
        for attempt in delivery.attempts if show_attempts else []:
            outcome = attempt.status_code or attempt.error
            click.echo(f"    {_when(attempt.at)}  {outcome}  {attempt.duration_ms:.0f} ms")


@webhook.command("redeliver")
@click.argument("delivery_id")
def redeliver(delivery_id: str) -> None:
    """Send a delivery again: same webhook-id and body, a full set of attempts."""
    with Client() as client:
        _log(client).resend(delivery_id, client.tasks.deliver_webhook)
    click.echo(f"re-sending {delivery_id}")
