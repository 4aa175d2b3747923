"""Signing in and out; sign-in attempts are limited per client address and per username."""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit

from flask import Blueprint, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from shared.models.users import Role
from webui.auth import public, requires, sign_in_session, sign_out_session
from webui.services import services

__all__ = ["blueprint", "safe_next"]

log = logging.getLogger(__name__)

# Printable ASCII without the space: browsers drop tabs and newlines from a URL and
# read a backslash as a slash, so anything else could turn a path into another host.
_PLAIN_PATH = re.compile(r"/[!-\[\]-~]{0,2047}")
_TOO_MANY = "Too many sign-in attempts. Wait a minute and try again."
_WRONG = "Wrong username or password."
_DISABLED = "This account is disabled; ask an operator to enable it."


def safe_next(target: str | None) -> str:
    """Where to go after sign-in: a path on this site only (no open redirect).

    Anything that is not a plain absolute path (whitespace or a control character
    anywhere, a backslash, ``//`` at the start, a scheme or a host) falls back to
    the conversations page.
    """
    if target and _PLAIN_PATH.fullmatch(target) and not target.startswith("//"):
        parts = urlsplit(target)
        if not parts.scheme and not parts.netloc:
            return target
    return url_for("pages.home.index")


def _form(error: str | None, status: int, next_url: str) -> ResponseReturnValue:
    headers = {"Retry-After": "60"} if status == 429 else {}
    return render_template("sign_in.html", error=error, next=next_url), status, headers


def _throttled(client: str, username: str) -> bool:
    """Counts the attempt against the address, then the username; True when over a limit."""
    throttle = services().throttle
    if not throttle.attempt(client):
        log.warning("sign-in rate limit reached for address %s", client)
        return True
    if not throttle.attempt_as(username):
        log.warning("sign-in rate limit reached for username %r", username[:64])
        return True
    return False


@public
def sign_in() -> ResponseReturnValue:
    if request.method == "GET":
        return _form(None, 200, safe_next(request.args.get("next")))
    svc = services()
    next_url = safe_next(request.form.get("next"))
    client = request.remote_addr or "unknown"
    username = request.form.get("username", "").strip()
    if _throttled(client, username):
        # The same answer whether or not the username exists.
        return _form(_TOO_MANY, 429, next_url)
    account = svc.users.authenticate(username, request.form.get("password", ""))
    if account is None:
        log.info("failed sign-in as %r from %s", username[:64], client)
        return _form(_WRONG, 401, next_url)
    if account.disabled:
        log.info("disabled user %s tried to sign in from %s", username, client)
        return _form(_DISABLED, 403, next_url)
    sign_in_session(username, generation=account.generation)
    log.info("%s signed in from %s", username, client)
    return redirect(next_url)


@requires(Role.VIEWER)
def sign_out() -> ResponseReturnValue:
    sign_out_session()
    return redirect(url_for(".sign_in"))


def blueprint() -> Blueprint:
    bp = Blueprint("session", __name__)
    bp.add_url_rule("/sign-in", view_func=sign_in, methods=["GET", "POST"])
    bp.add_url_rule("/sign-out", view_func=sign_out, methods=["POST"])
    return bp
