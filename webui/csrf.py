"""CSRF protection for requests a browser authenticates by its session cookie.

A random token per session is put in every form (field ``csrf_token``) and in a
``<meta name="csrf-token">`` for fetch (header ``X-CSRF-Token``). Every
state-changing request without a bearer token must carry it. Bearer-token API
calls are exempt: a browser never attaches a bearer token by itself.
"""

from __future__ import annotations

import hmac
import secrets

from flask import Flask, request, session

from webui.errors import HttpProblem

__all__ = ["FIELD", "HEADER", "csrf_token", "init_app", "protect", "rotate"]

FIELD = "csrf_token"
HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SESSION_KEY = "csrf"


def csrf_token() -> str:
    """This session's token, created on first use."""
    token = session.get(_SESSION_KEY)
    if not isinstance(token, str) or not token:
        token = rotate()
    return token


def rotate() -> str:
    """A fresh token (at sign-in, so a token seen before it is worthless after)."""
    token = secrets.token_urlsafe(32)
    session[_SESSION_KEY] = token
    return token


def protect() -> None:
    """Rejects a state-changing request whose token is missing or wrong (403)."""
    if request.method in SAFE_METHODS:
        return
    expected = session.get(_SESSION_KEY)
    given = request.headers.get(HEADER) or request.form.get(FIELD)
    if not isinstance(expected, str) or not given or not hmac.compare_digest(expected, given):
        raise HttpProblem(
            403, "csrf_failed", "missing or wrong CSRF token; reload the page and try again"
        )


def init_app(app: Flask) -> None:
    app.jinja_env.globals["csrf_token"] = csrf_token
