"""/routes: where approval requests are sent (email to approvers); operators write, every
role reads."""

from __future__ import annotations

from flask import Blueprint, Response
from pydantic import BaseModel, ConfigDict

from shared.models.routes import Route
from shared.models.users import Role
from shared.store.routes import RouteStore
from webui.api.replies import reply
from webui.auth import requires
from webui.operations import operation
from webui.params import json_body
from webui.services import services

__all__ = ["RouteBody", "RouteList", "blueprint"]


class RouteBody(Route):
    """A route to add, read strictly as every request body is (no `true` for 1, no "60" for 60).
    It sends somewhere (email recipients or a Slack channel), and escalates to another route."""

    model_config = ConfigDict(strict=True)


class RouteList(BaseModel):
    items: list[Route]


def _routes() -> RouteStore:
    svc = services()
    return RouteStore(svc.redis, svc.keys)


@requires(Role.VIEWER)
@operation("Every route, by name", response=RouteList)
def list_routes() -> Response:
    return reply(RouteList(items=_routes().all()))


@requires(Role.OPERATOR)
@operation(
    "Add a route: requests matching it are emailed to its recipients, each with a signed link",
    request=RouteBody,
    response=Route,
    status=201,
    errors=(400, 409, 422),
)
def add_route() -> Response:
    route = json_body(RouteBody)
    _routes().add(route)
    return reply(route, 201)


@requires(Role.OPERATOR)
@operation("Remove a route", response=RouteList, errors=(404,))
def remove_route(name: str) -> Response:
    _routes().remove(name)
    return reply(RouteList(items=_routes().all()))


def blueprint() -> Blueprint:
    bp = Blueprint("routes", __name__)
    bp.add_url_rule("/routes", view_func=list_routes, methods=["GET"])
    bp.add_url_rule("/routes", endpoint="add_route", view_func=add_route, methods=["POST"])
    bp.add_url_rule("/routes/<name>", view_func=remove_route, methods=["DELETE"])
    return bp
