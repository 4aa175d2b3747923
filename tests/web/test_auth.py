"""Sign-in, sessions, CSRF, rate limiting, security headers, and the admin account."""

from __future__ import annotations

import logging

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.web.conftest import (
    OPERATOR,
    AppFactory,
    form_csrf,
    new_conversation,
    page_csrf,
    services_of,
    sign_in,
)
from webui.services import Services


def test_pages_redirect_to_sign_in(http: FlaskClient) -> None:
    response = http.get("/conversations?status=idle")
    assert response.status_code == 302
    assert response.headers["Location"] == "/sign-in?next=/conversations?status%3Didle"
    assert http.get("/usage").status_code == 302


def test_public_routes(http: FlaskClient) -> None:
    assert http.get("/sign-in").status_code == 200
    assert http.get("/static/app.css").status_code == 200
    health = http.get("/healthz")
    assert health.status_code == 200 and health.json == {"status": "ok", "redis": True}


def test_sign_in_and_out(http: FlaskClient, svc: Services) -> None:
    svc.users.add(*OPERATOR)
    page = http.get("/sign-in?next=/usage")
    response = http.post(
        "/sign-in",
        data={
            "username": OPERATOR[0],
            "password": OPERATOR[1],
            "next": "/usage",
            "csrf_token": form_csrf(page.text),
        },
    )
    assert response.status_code == 302 and response.headers["Location"] == "/usage"
    listing = http.get("/conversations")
    assert listing.status_code == 200 and OPERATOR[0] in listing.text
    # the session is the operator role on the API too
    assert http.get("/api/v1/conversations").status_code == 200
    signed_out = http.post("/sign-out", data={"csrf_token": form_csrf(listing.text)})
    assert signed_out.status_code == 302
    assert http.get("/conversations").status_code == 302


def test_sign_in_rejects_wrong_password_and_foreign_next(http: FlaskClient, svc: Services) -> None:
    svc.users.add(*OPERATOR)
    wrong = sign_in(http, password="not the password")
    assert wrong.status_code == 401 and "Wrong username or password" in wrong.text
    unknown = sign_in(http, username="nobody")
    assert unknown.status_code == 401
    page = http.get("/sign-in")
    response = http.post(
        "/sign-in",
        data={
            "username": OPERATOR[0],
            "password": OPERATOR[1],
            "next": "//evil.example/x",
            "csrf_token": form_csrf(page.text),
        },
    )
    assert response.headers["Location"] == "/"


def test_session_cookie_flags(make_app: AppFactory) -> None:
    for secure in (False, True):
        app = make_app(cookie_secure=secure)
        services_of(app).users.add(*OPERATOR)
        http = app.test_client()
        response = sign_in(http)
        cookie = response.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
        assert ("Secure" in cookie) is secure


def test_sign_in_is_rate_limited_per_address(make_app: AppFactory) -> None:
    app = make_app(login_attempts_per_minute=3)
    services_of(app).users.add(*OPERATOR)
    http = app.test_client()
    for _ in range(3):
        assert sign_in(http, password="wrong password!").status_code == 401
    limited = sign_in(http)  # even the right password is refused now
    assert limited.status_code == 429
    assert limited.headers["Retry-After"] == "60"
    assert "Too many sign-in attempts" in limited.text
    other = app.test_client()
    other_page = other.get("/sign-in", environ_base={"REMOTE_ADDR": "10.0.0.9"})
    ok = other.post(
        "/sign-in",
        data={
            "username": OPERATOR[0],
            "password": OPERATOR[1],
            "csrf_token": form_csrf(other_page.text),
        },
        environ_base={"REMOTE_ADDR": "10.0.0.9"},
    )
    assert ok.status_code == 302  # another address has its own budget
    svc = services_of(app)
    ttl = svc.redis.ttl(f"{svc.keys.prefix}:login-window:127.0.0.1")
    assert 0 < ttl <= 60


def test_form_post_without_csrf_is_rejected(signed_in: FlaskClient, svc: Services) -> None:
    cid = svc.client.new_conversation().conversation_id
    for data in ({}, {"csrf_token": "forged"}):
        response = signed_in.post(f"/conversations/{cid}/abort", data=data)
        assert response.status_code == 403
        assert "CSRF" in response.text
    response = signed_in.post(
        f"/conversations/{cid}/close", data={"csrf_token": page_csrf(signed_in)}
    )
    assert response.status_code == 302
    assert svc.store.get(cid).closed


def test_session_api_calls_need_the_csrf_header(signed_in: FlaskClient, svc: Services) -> None:
    no_header = signed_in.post("/api/v1/conversations", json={})
    assert no_header.status_code == 403
    assert no_header.json["error"]["code"] == "csrf_failed"
    created = signed_in.post(
        "/api/v1/conversations", json={}, headers={"X-CSRF-Token": page_csrf(signed_in)}
    )
    assert created.status_code == 201


def test_sign_in_form_needs_csrf(http: FlaskClient, svc: Services) -> None:
    svc.users.add(*OPERATOR)
    response = http.post("/sign-in", data={"username": OPERATOR[0], "password": OPERATOR[1]})
    assert response.status_code == 403
    assert http.get("/conversations").status_code == 302  # not signed in


def test_bearer_calls_are_exempt_from_csrf(http: FlaskClient, submitter: dict[str, str]) -> None:
    assert new_conversation(http, submitter)


def test_sign_in_rotates_the_session(http: FlaskClient, svc: Services) -> None:
    svc.users.add(*OPERATOR)
    before = form_csrf(http.get("/sign-in").text)
    sign_in(http)
    assert page_csrf(http) != before


def test_removed_user_loses_the_session(signed_in: FlaskClient, svc: Services) -> None:
    svc.users.remove(OPERATOR[0])
    assert signed_in.get("/conversations").status_code == 302


@pytest.mark.parametrize("path", ["/sign-in", "/api/v1/conversations", "/nope", "/healthz"])
def test_security_headers_everywhere(http: FlaskClient, path: str) -> None:
    headers = http.get(path).headers
    assert headers["Content-Security-Policy"].startswith("default-src 'self'")
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert "unsafe-inline" not in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"


def test_pages_have_no_inline_script(signed_in: FlaskClient, svc: Services) -> None:
    cid = svc.client.new_conversation().conversation_id
    for path in ("/conversations", f"/conversations/{cid}", "/usage", "/sign-in"):
        html = signed_in.get(path).text
        assert "<script>" not in html and "onclick" not in html
        assert all("src=" in tag for tag in html.split("<script")[1:])


def test_admin_account_from_settings(make_app: AppFactory) -> None:
    app = make_app(admin_user="root", admin_password="s3cret-admin-pw")
    assert services_of(app).users.verify("root", "s3cret-admin-pw")
    assert sign_in(app.test_client(), "root", "s3cret-admin-pw").status_code == 302


def test_random_secret_key_is_warned_about(
    make_app: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="webui"):
        first: Flask = make_app(secret_key="")
        second: Flask = make_app(secret_key="")
    assert "sessions will not survive a restart" in caplog.text
    assert first.secret_key != second.secret_key and len(str(first.secret_key)) >= 32
