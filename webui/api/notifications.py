"""/notifications: the approvals inbox; resolving one needs the operator role."""

from __future__ import annotations

from dataclasses import dataclass

from flask import Blueprint, Request, Response, request
from pydantic import BaseModel, Field, RootModel

from shared.approvals import Notification, Resolution
from shared.notifications import NotificationStore
from shared.users import Role
from webui.api.operations import LIMIT, OFFSET, Param, operation
from webui.api.replies import reply
from webui.auth import current_principal, requires
from webui.params import int_param, json_body
from webui.services import services

__all__ = ["FILTERS", "InboxFilter", "NotificationList", "ResolutionBody", "blueprint"]

_TEXT = {"type": "string"}
FILTERS = (
    Param("tool", _TEXT, "Only calls of this tool."),
    Param("batch_id", _TEXT, "Only this batch's notifications."),
    Param("conversation_id", _TEXT, "Only this conversation's notifications."),
)


class NotificationList(BaseModel):
    items: list[Notification]
    pending_count: int = Field(description="Pending notifications matching the filters.")
    offset: int
    limit: int


class ResolutionBody(RootModel[Resolution]):
    """Allow (optionally with edited arguments), Deny with a reason, or Submit content."""


@dataclass(frozen=True)
class InboxFilter:
    """The inbox filters of a request's query string (an empty value means unset)."""

    tool: str | None = None
    batch_id: str | None = None
    conversation_id: str | None = None

    @classmethod
    def of(cls, source: Request) -> InboxFilter:
        return cls(
            *(source.args.get(name) or None for name in ("tool", "batch_id", "conversation_id"))
        )

    def query(self) -> dict[str, str]:
        """The filters that are set, as query parameters."""
        return {k: v for k, v in vars(self).items() if v}

    def page(self, store: NotificationStore, *, offset: int, limit: int) -> list[Notification]:
        return store.pending(
            tool=self.tool,
            batch_id=self.batch_id,
            conversation_id=self.conversation_id,
            offset=offset,
            limit=limit,
        )

    def count(self, store: NotificationStore) -> int:
        return store.count_pending(
            tool=self.tool, batch_id=self.batch_id, conversation_id=self.conversation_id
        )


@requires(Role.VIEWER)
@operation(
    "Pending notifications, oldest first",
    response=NotificationList,
    params=(*FILTERS, OFFSET, LIMIT),
    errors=(400,),
)
def pending() -> Response:
    store, inbox = services().notifications, InboxFilter.of(request)
    offset = int_param("offset", 0, low=0, high=10**9)
    limit = int_param("limit", 50, low=1, high=200)
    return reply(
        NotificationList(
            items=inbox.page(store, offset=offset, limit=limit),
            pending_count=inbox.count(store),
            offset=offset,
            limit=limit,
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
    decision = json_body(ResolutionBody).root
    actor = current_principal().name
    return reply(services().notifications.resolve(nid, decision, actor=actor))


def blueprint() -> Blueprint:
    bp = Blueprint("notifications", __name__)
    bp.add_url_rule("/notifications", view_func=pending)
    bp.add_url_rule("/notifications/<id:nid>", view_func=get)
    bp.add_url_rule("/notifications/<id:nid>/resolve", view_func=resolve, methods=["POST"])
    return bp
