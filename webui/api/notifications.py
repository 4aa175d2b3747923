"""/notifications: the approvals inbox; resolving needs the approver role, within its scopes."""

from __future__ import annotations

from typing import Annotated

from flask import Blueprint, Response
from pydantic import BaseModel, Field, RootModel

from shared.approval_links import MAX_LINK_LIFETIME_S
from shared.errors import Conflict
from shared.models.notifications import (
    Allow,
    Deny,
    Notification,
    NotificationStatus,
    Resolution,
    Submit,
)
from shared.models.users import Role
from webui.api.models import BulkResolveBody, BulkResolveResult, DenyBody, Integer, RequestBody
from webui.api.replies import reply
from webui.approvals.access import claim as claim_as_caller
from webui.approvals.access import release as release_as_caller
from webui.approvals.access import resolve as resolve_as_caller
from webui.approvals.access import resolve_check
from webui.approvals.bulk import apply, scope_of
from webui.approvals.inbox import InboxFilter
from webui.auth import current_principal, requires
from webui.operations import operation
from webui.params import json_body
from webui.queries import NotificationsQuery
from webui.services import services

__all__ = ["LinkCreated", "NewLink", "NotificationList", "ResolutionBody", "blueprint"]


class NotificationList(BaseModel):
    items: list[Notification]
    pending_count: int = Field(description="Pending notifications matching the filters.")
    offset: int
    limit: int


class NewLink(RequestBody):
    """A signed link for one approver to decide one request."""

    approver: str = Field(
        min_length=1, max_length=100, description="The user (signed in) the link works for."
    )
    expires_in_s: Integer = Field(
        3600, gt=0, le=MAX_LINK_LIFETIME_S, description="Seconds the link stays usable."
    )


class LinkCreated(BaseModel):
    url: str = Field(description="Opening it shows the request; its form decides, once.")
    approver: str
    expires_at: float


class ResolutionBody(RootModel[Annotated[Allow | DenyBody | Submit, Field(discriminator="kind")]]):
    """Allow (optionally with edited arguments), Deny with a reason, or Submit content."""

    def decision(self) -> Resolution:
        """The resolution as the stores take it."""
        chosen = self.root
        return Deny(reason=chosen.reason) if isinstance(chosen, DenyBody) else chosen


@requires(Role.VIEWER)
@operation(
    "Pending notifications, oldest first",
    response=NotificationList,
    query=NotificationsQuery,
    errors=(400,),
)
def pending() -> Response:
    store, query = services().notifications, NotificationsQuery.read().of_caller(resolve_check())
    listing = query.listing(store, offset=query.offset, limit=query.limit)
    return reply(
        NotificationList(
            items=listing.notes,
            pending_count=listing.count,
            offset=query.offset,
            limit=query.limit,
        )
    )


@requires(Role.VIEWER)
@operation("A notification and, once settled, its outcome", response=Notification, errors=(404,))
def get(nid: str) -> Response:
    return reply(services().notifications.get(nid))


@requires(Role.APPROVER)
@operation(
    "Resolve a pending notification; the first resolution wins",
    request=ResolutionBody,
    response=Notification,
    errors=(400, 403, 404, 409, 422),
)
def resolve(nid: str) -> Response:
    decision = json_body(ResolutionBody).decision()
    return reply(resolve_as_caller(nid, decision))


@requires(Role.APPROVER)
@operation(
    "Claim a pending notification: say you are on it (who may resolve it may claim it; "
    "anyone may still resolve it)",
    response=Notification,
    errors=(403, 404, 409),
)
def claim(nid: str) -> Response:
    return reply(claim_as_caller(nid))


@requires(Role.APPROVER)
@operation(
    "Release a claim: yours, or anyone's for an operator",
    response=Notification,
    errors=(403, 404, 409),
)
def release(nid: str) -> Response:
    return reply(release_as_caller(nid))


@requires(Role.APPROVER)
@operation(
    "Allow or deny every pending notification a filter matches, if there are expected_count",
    request=BulkResolveBody,
    response=BulkResolveResult,
    errors=(400, 403, 409, 422),
)
def bulk_resolve() -> Response:
    body = json_body(BulkResolveBody)
    facets = {k: v or None for k, v in body.filter.model_dump(exclude={"created_before"}).items()}
    scope = scope_of(InboxFilter(**facets), created_before=body.filter.created_before)
    outcome = apply(
        services().notifications,
        scope,
        body.decision(),
        expected=body.expected_count,
        actor=current_principal().name,
        check=resolve_check(),
    )
    return reply(BulkResolveResult(**vars(outcome), created_before=scope.created_before))


@requires(Role.OPERATOR)
@operation(
    "A signed single-use link for one approver to decide a pending notification",
    request=NewLink,
    response=LinkCreated,
    status=201,
    errors=(400, 404, 409, 422),
)
def create_link(nid: str) -> Response:
    body = json_body(NewLink)
    svc = services()
    note = svc.notifications.get(nid)
    if note.status is not NotificationStatus.PENDING:
        raise Conflict(f"notification {nid} is {note.status.value}; links are for pending ones")
    token = svc.links.token(nid, body.approver, expires_in_s=body.expires_in_s)
    claims = svc.links.claims(token)
    return reply(
        LinkCreated(url=svc.links.url(token), approver=body.approver, expires_at=claims.expires_at),
        201,
    )


def blueprint() -> Blueprint:
    bp = Blueprint("notifications", __name__)
    bp.add_url_rule("/notifications", view_func=pending)
    bp.add_url_rule("/notifications/bulk-resolve", view_func=bulk_resolve, methods=["POST"])
    bp.add_url_rule("/notifications/<nid:nid>", view_func=get)
    bp.add_url_rule("/notifications/<nid:nid>/resolve", view_func=resolve, methods=["POST"])
    bp.add_url_rule("/notifications/<nid:nid>/links", view_func=create_link, methods=["POST"])
    bp.add_url_rule("/notifications/<nid:nid>/claim", view_func=claim, methods=["POST"])
    bp.add_url_rule("/notifications/<nid:nid>/release", view_func=release, methods=["POST"])
    return bp
