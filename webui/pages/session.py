"""Signing in and out; sign-in attempts are limited per client address."""

from __future__ import annotations

import logging

from flask import Blueprint, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue

from shared.users import Role
from webui.auth import public, requires, sign_in_session
from webui.services import services

__all__ = ["blueprint", "safe_next"]

log = logging.getLogger(__name__)


def safe_next(target: str | None) -> str:
    """Where to go after sign-in: a path on this site only (no open redirect)."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return url_for("pages.conversations.index")


def _form(error: str | None, status: int, next_url: str) -> ResponseReturnValue:
    headers = {"Retry-After": "60"} if status == 429 else {}
    return render_template("sign_in.html", error=error, next=next_url), status, headers


@public
def sign_in() -> ResponseReturnValue:
    if request.method == "GET":
        return _form(None, 200, safe_next(request.args.get("next")))
    svc = services()
    next_url = safe_next(request.form.get("next"))
    client = request.remote_addr or "unknown"
    if not svc.throttle.attempt(client):
        log.warning("sign-in rate limit reached for %s", client)
        return _form("Too many sign-in attempts. Wait a minute and try again.", 429, next_url)
    username = request.form.get("username", "").strip()
    if not svc.users.verify(username, request.form.get("password", "")):
        log.info("failed sign-in as %r from %s", username[:64], client)
        return _form("Wrong username or password.", 401, next_url)
    sign_in_session(username)
    log.info("%s signed in from %s", username, client)
    return redirect(next_url)


@requires(Role.VIEWER)
def sign_out() -> ResponseReturnValue:
    session.clear()
    return redirect(url_for(".sign_in"))


def blueprint() -> Blueprint:
    bp = Blueprint("session", __name__)
    bp.add_url_rule("/sign-in", view_func=sign_in, methods=["GET", "POST"])
    bp.add_url_rule("/sign-out", view_func=sign_out, methods=["POST"])
    return bp
