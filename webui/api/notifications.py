"""/notifications: the approvals inbox; resolving one needs the operator role."""

from __future__ import annotations

from typing import Annotated

from flask import Blueprint, Response
from pydantic import BaseModel, Field, RootModel

from shared.models.notifications import Allow, Deny, Notification, Resolution, Submit
from shared.store.users import Role
from webui.api.models import BulkResolveBody, BulkResolveResult, DenyBody
from webui.api.replies import reply
from webui.auth import current_principal, requires
from webui.bulk import BulkScope, apply
from webui.inbox import InboxFilter
from webui.operations import operation
from webui.params import json_body
from webui.queries import NotificationsQuery
from webui.services import services

__all__ = ["NotificationList", "ResolutionBody", "blueprint"]


class NotificationList(BaseModel):
    items: list[Notification]
    pending_count: int = Field(description="Pending notifications matching the filters.")
    offset: int
    limit: int


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
    store, query = services().notifications, NotificationsQuery.read()
    return reply(
        NotificationList(
            items=query.page(store, offset=query.offset, limit=query.limit),
            pending_count=query.count(store),
            offset=query.offset,
            limit=query.limit,
        )
    )


@requires(Role.VIEWER)
@operation("A notification and, once settled, its outcome", response=Notification, errors=(404,))
def get(nid: str) -> Response:
    return reply(services().notifications.get(nid))


@requires(Role.OPERATOR)
@operation(
    "Resolve a pending notification; the first resolution wins",
    request=ResolutionBody,
    response=Notification,
    errors=(400, 404, 409, 422),
)
def resolve(nid: str) -> Response:
    decision = json_body(ResolutionBody).decision()
    actor = current_principal().name
    return reply(services().notifications.resolve(nid, decision, actor=actor))


@requires(Role.OPERATOR)
@operation(
    "Allow or deny every pending notification a filter matches, if there are expected_count",
    request=BulkResolveBody,
    response=BulkResolveResult,
    errors=(400, 409, 422),
)
def bulk_resolve() -> Response:
    body = json_body(BulkResolveBody)
    facets = {k: v or None for k, v in body.filter.model_dump(exclude={"created_before"}).items()}
    scope = BulkScope.pin(InboxFilter(**facets), created_before=body.filter.created_before)
    outcome = apply(
        services().notifications,
        scope,
        body.decision(),
        expected=body.expected_count,
        actor=current_principal().name,
    )
    return reply(BulkResolveResult(**vars(outcome), created_before=scope.created_before))


def blueprint() -> Blueprint:
    bp = Blueprint("notifications", __name__)
    bp.add_url_rule("/notifications", view_func=pending)
    bp.add_url_rule("/notifications/bulk-resolve", view_func=bulk_resolve, methods=["POST"])
    bp.add_url_rule("/notifications/<nid:nid>", view_func=get)
    bp.add_url_rule("/notifications/<nid:nid>/resolve", view_func=resolve, methods=["POST"])
    return bp
