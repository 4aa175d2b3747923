"""`signoff route`: where approval requests are sent (email to approvers, with signed links)."""

from __future__ import annotations

import click
from pydantic import ValidationError

from cli.users import Duration
from shared.client import Client
from shared.errors import InvalidInput
from shared.models.routes import EmailRecipient, Route
from shared.store.routes import RouteStore

__all__ = ["route"]


def _recipient(text: str) -> EmailRecipient:
    approver, sep, address = text.partition("=")
    if not sep:
        raise InvalidInput(f"--email {text!r} must be APPROVER=ADDRESS (bob=bob@example.com)")
    return EmailRecipient(approver=approver.strip(), address=address.strip())


@click.group()
def route() -> None:
    """Routes: which approval requests are emailed to whom."""


@route.command("add")
@click.argument("name")
@click.option("--tool", default=None, help="Only calls of this tool.")
@click.option("--label", default=None, help="Only conversations with this label.")
@click.option("--batch", "batch_id", default=None, help="Only this batch's requests.")
@click.option("--agent", default=None, help="Only this agent's requests.")
@click.option(
    "--email",
    "emails",
    multiple=True,
    metavar="APPROVER=ADDRESS",
    help="Mail the approver at the address, with a link that works for them (repeat).",
)
@click.option("--slack-channel", default=None, help="Post requests here with Allow and Deny.")
@click.option(
    "--escalate-after",
    type=Duration(),
    default=None,
    help="With --escalate-to: still pending this long (90s, 15m, 2h) after this route sent it.",
)
@click.option("--escalate-to", default=None, help="The route a request then goes to (once).")
@click.option("--escalation-only", is_flag=True, help="Only another route's escalation target.")
def add(
    name: str,
    tool: str | None,
    label: str | None,
    batch_id: str | None,
    agent: str | None,
    emails: tuple[str, ...],
    slack_channel: str | None,
    escalate_after: int | None,
    escalate_to: str | None,
    escalation_only: bool,
) -> None:
    """Add a route; requests it matches are emailed from the next one on."""
    try:
        found = Route(
            name=name,
            tool=tool,
            label=label,
            batch_id=batch_id,
            agent=agent,
            email=[_recipient(text) for text in emails],
            slack_channel=slack_channel,
            escalate_after_s=escalate_after,
            escalate_to=escalate_to,
            escalation_only=escalation_only,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'route'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidInput(problems) from None
    with Client() as client:
        RouteStore(client.redis, client.keys).add(found)
    click.echo(f"route {name!r} added")


@route.command("list")
def list_routes() -> None:
    """Every route: name, what it matches, who is mailed."""
    with Client() as client:
        routes = RouteStore(client.redis, client.keys).all()
    for found in routes:
        matched = {"tool": found.tool, "label": found.label, "batch": found.batch_id}
        facets = " ".join(f"{k}={v}" for k, v in (matched | {"agent": found.agent}).items() if v)
        to = ", ".join(f"{r.approver}={r.address}" for r in found.email)
        if found.slack_channel:
            to = ", ".join(part for part in (to, f"slack #{found.slack_channel}") if part)
        then = (
            f"\tthen {found.escalate_to} after {found.escalate_after_s}s"
            if found.escalate_to
            else ""
        )
        matched_text = "escalation only" if found.escalation_only else facets or "every request"
        click.echo(f"{found.name}\t{matched_text}\t{to}{then}")


@route.command("remove")
@click.argument("name")
def remove(name: str) -> None:
    """Remove a route."""
    with Client() as client:
        RouteStore(client.redis, client.keys).remove(name)
    click.echo(f"route {name!r} removed")
