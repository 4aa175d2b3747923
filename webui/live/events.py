"""/conversations/<id>/events and /events: Server-Sent Events, replayed and live."""

from __future__ import annotations

from flask import Blueprint, Response

from shared.models.users import Role
from webui.auth import requires
from webui.live.streams import conversation_stream, global_stream, sse_response
from webui.operations import operation
from webui.queries import EventsQuery
from webui.services import services

__all__ = ["blueprint"]


@requires(Role.VIEWER)
@operation(
    "Follow a conversation's events; the gap after Last-Event-ID is replayed first",
    stream=True,
    query=EventsQuery,
    errors=(400, 404, 503),
)
def conversation_events(cid: str) -> Response:
    svc = services()
    svc.store.get(cid)
    after = EventsQuery.read().after
    sub = svc.broadcaster.subscribe(cid)
    body = conversation_stream(
        svc.events,
        svc.broadcaster,
        sub,
        cid,
        last_event_id=after,
        heartbeat_s=svc.settings.sse_heartbeat_s,
    )
    return sse_response(body, svc.broadcaster, sub)


@requires(Role.VIEWER)
@operation(
    "Follow every conversation's events, live only (there is no global stream to replay)",
    stream=True,
    errors=(503,),
)
def all_events() -> Response:
    svc = services()
    sub = svc.broadcaster.subscribe(None)
    body = global_stream(svc.broadcaster, sub, heartbeat_s=svc.settings.sse_heartbeat_s)
    return sse_response(body, svc.broadcaster, sub)


def blueprint() -> Blueprint:
    bp = Blueprint("events", __name__)
    bp.add_url_rule("/conversations/<id:cid>/events", view_func=conversation_events)
    bp.add_url_rule("/events", endpoint="all", view_func=all_events)
    return bp
