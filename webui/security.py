"""Security headers on every response, and the session cookie's flags."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Flask, Response, request
from flask.sessions import SecureCookieSessionInterface, SessionMixin

from shared.settings import Settings

__all__ = ["CONTENT_SECURITY_POLICY", "cookie_config", "init_app"]

# No inline script or style anywhere: JavaScript and CSS come from /static.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
    "form-action 'self'; object-src 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
SESSION_LIFETIME = timedelta(hours=12)


def cookie_config(settings: Settings) -> dict[str, Any]:
    """Flask config for the session cookie: HttpOnly, SameSite=Lax, Secure when configured."""
    return {
        "SESSION_COOKIE_NAME": "signoff_session",
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_SECURE": settings.cookie_secure,
        "PERMANENT_SESSION_LIFETIME": SESSION_LIFETIME,
    }


def _add_headers(response: Response) -> Response:
    for name, value in _HEADERS.items():
        response.headers.setdefault(name, value)
    if request.endpoint != "static":
        # Pages and API answers hold private data: no shared or browser caches.
        response.headers.setdefault("Cache-Control", "no-store")
    return response


class NavigationSessions(SecureCookieSessionInterface):
    """Only a page a person navigates to re-sends an unchanged session cookie.

    The session cookie carries flashed messages; a background request (a live list's refresh,
    the nav badge's count) that started before a form was posted would otherwise answer with
    the older cookie after the form's answer, and the message would be lost.
    """

    def should_set_cookie(self, app: Flask, session: SessionMixin) -> bool:
        background = request.headers.get("Sec-Fetch-Mode", "navigate") != "navigate"
        if background and not session.modified:
            return False
        return super().should_set_cookie(app, session)


def init_app(app: Flask) -> None:
    app.session_interface = NavigationSessions()
    app.after_request(_add_headers)
