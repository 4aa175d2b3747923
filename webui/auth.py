"""Who is calling, and may they: sessions for accounts, bearer tokens for API clients.

Every view requires a signed-in user or a token unless marked `public`. A
view declares the role it needs with `requires`; a view that declares nothing
needs ``operator``, so a forgotten declaration fails closed. A session has its
account's role and scopes, read on every request. State-changing requests
authenticated by the session (or by nothing, like the sign-in form) must carry
the CSRF token; bearer calls need not.
A view marked `signature_authenticated` (an inbound trigger) has no principal and
no CSRF check: it authenticates each request by its own signature, and refuses it
(401) without a valid one.

The session cookie carries only a random session id; the session lives in Redis
(`shared.store.sessions`) and is checked on every request, so signing out, a password
change, or disabling or removing the account ends it at once, and a replayed
cookie is refused. An expired bearer token is refused with a message saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, TypeVar

from flask import Flask, current_app, g, request, session

from shared.models.owners import is_internal_owner
from shared.models.users import Role
from webui import csrf
from webui.errors import HttpProblem
from webui.services import services

__all__ = [
    "AuthMethod",
    "Principal",
    "actor",
    "current_principal",
    "init_app",
    "public",
    "required_role",
    "requires",
    "sign_in_session",
    "sign_out_session",
    "signature_authenticated",
]

F = TypeVar("F", bound=Callable[..., Any])
_PUBLIC_ENDPOINTS = frozenset({"static"})
_SESSION_ID = "sid"


class AuthMethod(str, Enum):
    SESSION = "session"
    TOKEN = "token"  # noqa: S105


@dataclass(frozen=True)
class Principal:
    """The caller of this request."""

    name: str
    role: Role
    method: AuthMethod
    scopes: tuple[str, ...] = ()  # an approver's (`shared.approvers`): none means every approval


def requires(role: Role) -> Callable[[F], F]:
    """Marks a view as needing `role` (or a role that includes it)."""

    def mark(view: F) -> F:
        view.required_role = role  # type: ignore[attr-defined]
        return view

    return mark


def public(view: F) -> F:
    """Marks a view that answers without authentication (sign-in, health)."""
    view.public = True  # type: ignore[attr-defined]
    return view


def signature_authenticated(view: F) -> F:
    """Marks a view that authenticates each request by its own signature (an inbound
    trigger checks its Standard Webhooks signature with the trigger's secret): no user,
    no session, so no CSRF token either; the view refuses a missing or bad signature."""
    view.public = True  # type: ignore[attr-defined]
    view.signature_authenticated = True  # type: ignore[attr-defined]
    return view


def required_role(view: Callable[..., Any]) -> Role | None:
    """The role a view needs; None for a public view."""
    if getattr(view, "public", False):
        return None
    role: Role = getattr(view, "required_role", Role.OPERATOR)
    return role


def current_principal() -> Principal:
    principal: Principal | None = g.get("principal")
    if principal is None:
        raise HttpProblem(401, "unauthorized", "sign in or send a bearer token")
    return principal


def actor() -> str:
    """Who is calling, for the log: how they authenticated and their user or token name."""
    principal = current_principal()
    return f"{principal.method.value} {principal.name}"


def sign_in_session(username: str, *, generation: int) -> None:
    """Starts a fresh session for `username` (no session fixation) with a new CSRF token.

    `generation` is the account's, read when its password was checked: a password
    change or a disable in between moves it on, and the session is refused.
    """
    lifetime_s = int(current_app.permanent_session_lifetime.total_seconds())
    session_id = services().users.sessions.start(
        username, generation=generation, lifetime_s=lifetime_s
    )
    session.clear()
    session[_SESSION_ID] = session_id
    session.permanent = True
    csrf.rotate()


def sign_out_session() -> None:
    """Ends this browser's session in Redis, so a copy of its cookie is worthless too."""
    session_id = session.get(_SESSION_ID)
    if isinstance(session_id, str):
        services().users.sessions.end(session_id)
    session.clear()


def _bearer_principal(header: str) -> Principal:
    scheme, _, token = header.partition(" ")
    found = services().tokens.lookup(token.strip()) if scheme.lower() == "bearer" else None
    if found is None:
        raise HttpProblem(
            401,
            "unauthorized",
            "the bearer token is unknown or revoked",
            headers={"WWW-Authenticate": 'Bearer realm="signoff", error="invalid_token"'},
        )
    if found.expired():
        raise _expired(found.expires_at or 0.0)
    if is_internal_owner(found.name):  # made before names were restricted; renamed at start
        raise HttpProblem(
            401,
            "unauthorized",
            f"the bearer token's name {found.name!r} reads as an internal owner; restart the web "
            "server to rename it, or issue a new token",
        )
    return Principal(found.name, found.role, AuthMethod.TOKEN, found.scopes)


def _expired(expires_at: float) -> HttpProblem:
    when = datetime.fromtimestamp(expires_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return HttpProblem(
        401,
        "token_expired",
        f"the bearer token expired at {when}; ask an operator for a new one",
        headers={
            "WWW-Authenticate": (
                'Bearer realm="signoff", error="invalid_token", '
                'error_description="the token expired"'
            )
        },
    )


def _session_principal() -> Principal | None:
    session_id = session.get(_SESSION_ID)
    if not isinstance(session_id, str):
        return None  # no session, or a cookie from before server-side sessions
    users = services().users
    found = users.sessions.get(session_id)
    account = None if found is None else users.record(found.username)
    if found is None or account is None or account.disabled:
        session.clear()  # signed out, expired, or the account was removed or disabled
        return None
    if account.generation != found.generation:
        users.sessions.end(session_id)  # begun before a password change or a disable
        session.clear()
        return None
    return Principal(found.username, account.role, AuthMethod.SESSION, tuple(account.scopes))


def _principal() -> Principal | None:
    header = request.headers.get("Authorization")
    if header:
        return _bearer_principal(header)
    return _session_principal()


def _public_principal() -> Principal | None:
    """The caller of a public view, if known: a bad or unknown bearer header is ignored."""
    try:
        return _principal()
    except HttpProblem:  # a 401 would send /sign-in back to /sign-in: a redirect loop
        return None


def _authenticate() -> None:
    view = current_app.view_functions.get(request.endpoint or "")
    if view is None:
        return  # no such route: 404/405 as usual
    if getattr(view, "signature_authenticated", False):
        g.principal = None  # a cookie or a bearer token grants nothing here
        return
    role = None if request.endpoint in _PUBLIC_ENDPOINTS else required_role(view)
    principal = _principal() if role is not None else _public_principal()
    g.principal = principal
    if role is not None and principal is None:
        raise HttpProblem(
            401,
            "unauthorized",
            "sign in or send a bearer token",
            headers={"WWW-Authenticate": 'Bearer realm="signoff"'},
        )
    if principal is None or principal.method is AuthMethod.SESSION:
        csrf.protect()
    if role is not None and principal is not None and not principal.role.allows(role):
        raise HttpProblem(
            403,
            "forbidden",
            f"this needs the {role.value} role; the caller has {principal.role.value}",
        )


def init_app(app: Flask) -> None:
    app.before_request(_authenticate)
