"""/users: accounts for operators: list them (role, scopes), disable one (ending its sessions),
enable."""

from __future__ import annotations

from flask import Blueprint, Response
from pydantic import BaseModel, Field

from shared.models.users import Role
from shared.store.users import UserInfo
from webui.api.replies import reply
from webui.auth import actor, requires
from webui.operations import operation
from webui.services import services

__all__ = ["UserList", "UserView", "blueprint"]


class UserView(BaseModel):
    """An account as listed: never its password hash."""

    name: str
    role: Role
    scopes: list[str] = Field(description="An approver's scopes; empty: every approval.")
    created_at: float
    disabled: bool = Field(description="A disabled account cannot sign in and has no sessions.")
    sessions: int = Field(description="Sessions signed in now.")


class UserList(BaseModel):
    items: list[UserView]


def _view(info: UserInfo) -> UserView:
    sessions = services().users.sessions.count(info.username)
    return UserView(
        name=info.username,
        role=info.role,
        scopes=list(info.scopes),
        created_at=info.created_at,
        disabled=info.disabled,
        sessions=sessions,
    )


@requires(Role.OPERATOR)
@operation("Operator accounts, by name", response=UserList)
def list_users() -> Response:
    return reply(UserList(items=[_view(info) for info in services().users.users()]))


@requires(Role.OPERATOR)
@operation(
    "Disable an account: its sessions end and it cannot sign in", response=UserView, errors=(404,)
)
def disable_user(name: str) -> Response:
    services().users.disable(name, actor=actor())
    return reply(_view(services().users.info(name)))


@requires(Role.OPERATOR)
@operation("Enable a disabled account: it can sign in again", response=UserView, errors=(404,))
def enable_user(name: str) -> Response:
    services().users.enable(name, actor=actor())
    return reply(_view(services().users.info(name)))


def blueprint() -> Blueprint:
    bp = Blueprint("users", __name__)
    bp.add_url_rule("/users", view_func=list_users, methods=["GET"])
    bp.add_url_rule("/users/<name>/disable", view_func=disable_user, methods=["POST"])
    bp.add_url_rule("/users/<name>/enable", view_func=enable_user, methods=["POST"])
    return bp
