"""Sign-in that cannot be abused: same-origin `next` only, revocable sessions, per-user throttle."""

from __future__ import annotations

import json
import re
import time

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.web.conftest import (
    OPERATOR,
    AppFactory,
    bearer,
    form_csrf,
    page_csrf,
    services_of,
    sign_in,
)
from webui.pages.session import safe_next
from webui.services import Services

COOKIE = "signoff_session"
DEFAULT = "/"

# Each of these, as a `next`, would send the browser to another host or break the answer.
FOREIGN = [
    "/\t/evil.example",  # browsers drop the tab: //evil.example
    "/\r\n/evil.example",  # was a 500 (a newline in a header)
    "/\n/evil.example",
    "\t//evil.example",
    " /evil.example",
    "/ /evil.example",
    "/\x00/evil.example",
    "/\x7f/evil.example",
    "/\u2028/evil.example",
    "//evil.example",
    "///evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "https://evil.example/",
    "http:/evil.example",
    "javascript:alert(1)",
    "evil.example",
    "",
]
LOCAL = ["/usage", "/conversations?status=idle", "/approvals/x.y#top", "/a/%2F%2Fb"]


@pytest.mark.parametrize("target", FOREIGN)
def test_next_outside_this_site_falls_back(app: Flask, target: str) -> None:
    with app.test_request_context():
        assert safe_next(target) == DEFAULT


@pytest.mark.parametrize("target", LOCAL)
def test_next_on_this_site_is_kept(app: Flask, target: str) -> None:
    with app.test_request_context():
        assert safe_next(target) == target


@pytest.mark.parametrize("raw", ["/%09/evil.example", "/%0D%0A/evil.example", "/%5Cevil.example"])
def test_sign_in_never_redirects_off_site(http: FlaskClient, svc: Services, raw: str) -> None:
    svc.users.add(*OPERATOR)
    csrf = form_csrf(http.get("/sign-in").text)
    response = http.post(
        "/sign-in",
        data=f"username={OPERATOR[0]}&password={OPERATOR[1].replace(' ', '+')}"
        f"&csrf_token={csrf}&next={raw}",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 302
    assert response.headers["Location"] == DEFAULT
    form = http.get(f"/sign-in?next={raw}")
    assert form.status_code == 200
    assert f'name="next" value="{DEFAULT}"' in form.text


def _signed_in(app: Flask) -> FlaskClient:
    http = app.test_client()
    assert sign_in(http).status_code == 302
    return http


def _cookie(http: FlaskClient) -> str:
    cookie = http.get_cookie(COOKIE)
    assert cookie is not None
    return cookie.value


def _refused(http: FlaskClient, csrf: str, svc: Services) -> None:
    """Pages send the client to sign-in, POSTs change nothing, the API answers 401."""
    page = http.get("/usage")
    assert page.status_code == 302 and page.headers["Location"].startswith("/sign-in")
    cid = svc.client.new_conversation().conversation_id
    close = http.post(f"/conversations/{cid}/close", data={"csrf_token": csrf})
    assert close.status_code == 302 and close.headers["Location"].startswith("/sign-in")
    assert not svc.store.get(cid).closed
    api = http.post("/api/v1/conversations", json={}, headers={"X-CSRF-Token": csrf})
    assert api.status_code == 401 and api.json["error"]["code"] == "unauthorized"


def _replayer(app: Flask, cookie: str) -> FlaskClient:
    """A new client holding a copy of an old session cookie."""
    http = app.test_client()
    http.set_cookie(COOKIE, cookie)
    return http


def test_signed_out_cookie_is_refused_when_replayed(app: Flask, svc: Services) -> None:
    svc.users.add(*OPERATOR)
    http = _signed_in(app)
    cookie, csrf = _cookie(http), page_csrf(http)
    assert _replayer(app, cookie).get("/usage").status_code == 200  # a copy works...
    assert http.post("/sign-out", data={"csrf_token": csrf}).status_code == 302
    _refused(_replayer(app, cookie), csrf, svc)  # ...until the session is signed out


def test_password_change_ends_every_session(app: Flask, svc: Services) -> None:
    svc.users.add(*OPERATOR)
    clients = [_signed_in(app), _signed_in(app)]
    tokens = [page_csrf(http) for http in clients]
    ended = svc.users.set_password(OPERATOR[0], "a brand new password")
    for http, csrf in zip(clients, tokens, strict=True):
        _refused(http, csrf, svc)
    assert ended == 2
    assert sign_in(app.test_client()).status_code == 401  # the old password is gone too
    assert sign_in(app.test_client(), password="a brand new password").status_code == 302


def test_disabled_user_is_signed_out_and_cannot_sign_in(app: Flask, svc: Services) -> None:
    svc.users.add(*OPERATOR)
    http = _signed_in(app)
    csrf = page_csrf(http)
    svc.users.disable(OPERATOR[0], actor="test")
    _refused(http, csrf, svc)
    refused = sign_in(app.test_client())
    assert refused.status_code == 403 and "disabled" in refused.text
    assert sign_in(app.test_client(), password="not the password").status_code == 401
    svc.users.enable(OPERATOR[0], actor="test")
    assert sign_in(app.test_client()).status_code == 302


def test_session_begun_before_a_password_change_is_refused(app: Flask, svc: Services) -> None:
    """A sign-in that checked the old password just before the change cannot outlive it."""
    svc.users.add(*OPERATOR)
    before = svc.users.record(OPERATOR[0])
    assert before is not None
    svc.users.set_password(OPERATOR[0], "changed meanwhile")
    late = svc.users.sessions.start(OPERATOR[0], generation=before.generation, lifetime_s=60)
    signer = app.session_interface.get_signing_serializer(app)  # type: ignore[attr-defined]
    http = app.test_client()
    http.set_cookie(COOKIE, signer.dumps({"sid": late, "csrf": "x"}))
    assert http.get("/usage").status_code == 302
    assert svc.users.sessions.get(late) is None  # and it is ended for good


@pytest.mark.one_redis  # finds the session's key with KEYS, one node's
def test_session_lives_in_redis_with_the_session_lifetime(app: Flask, svc: Services) -> None:
    svc.users.add(*OPERATOR)
    http = _signed_in(app)
    (key,) = svc.redis.keys(f"{svc.keys.prefix}:session:*")
    assert 0 < svc.redis.ttl(key) <= int(app.permanent_session_lifetime.total_seconds())
    assert json.loads(svc.redis.get(key))["username"] == OPERATOR[0]
    signer = app.session_interface.get_signing_serializer(app)  # type: ignore[attr-defined]
    session_id = signer.loads(_cookie(http))["sid"]
    assert session_id not in key  # Redis holds its digest: a copy of Redis signs nobody in
    assert svc.users.sessions.count(OPERATOR[0]) == 1
    http.post("/sign-out", data={"csrf_token": page_csrf(http)})
    assert svc.redis.keys(f"{svc.keys.prefix}:session*") == []


def test_sign_in_is_throttled_per_username_from_any_address(make_app: AppFactory) -> None:
    app = make_app(login_attempts_per_minute=50, login_attempts_per_user_per_minute=3)
    svc = services_of(app)
    svc.users.add(*OPERATOR)

    def attempt(username: str, password: str, address: str) -> tuple[int, str, str | None]:
        http = app.test_client()
        env = {"REMOTE_ADDR": address}
        form = http.get("/sign-in", environ_base=env)
        fields = {"username": username, "password": password, "csrf_token": form_csrf(form.text)}
        answer = http.post("/sign-in", data=fields, environ_base=env)
        alert = re.search(r'role="alert">([^<]*)<', answer.text)
        return answer.status_code, alert[1] if alert else "", answer.headers.get("Retry-After")

    for n in range(3):
        assert attempt(OPERATOR[0], f"guess number {n}", f"10.1.0.{n}")[0] == 401
    status, alert, retry = attempt(OPERATOR[0], OPERATOR[1], "10.1.0.99")  # right password
    assert (status, retry) == (429, "60") and alert.startswith("Too many sign-in attempts")
    for n in range(3):
        assert attempt("nobody", "guess", f"10.2.0.{n}")[0] == 401
    # An unknown user is answered exactly like a known one: nothing says whether it exists.
    assert attempt("nobody", "guess", "10.2.0.99") == (status, alert, retry)
    assert attempt("someone.else", "guess", "10.1.0.99")[0] == 401  # other names are unaffected
    ttl = svc.redis.ttl(f"{svc.keys.prefix}:login-window-user:{OPERATOR[0]}")
    assert 0 < ttl <= 60


def test_expired_token_is_refused_saying_so(http: FlaskClient, svc: Services) -> None:
    issued = svc.tokens.issue("short-lived", "viewer", expires_in_s=3600)
    assert http.get("/api/v1/conversations", headers=bearer(issued.token)).status_code == 200
    _expire(svc, issued.info.token_id)
    response = http.get("/api/v1/conversations", headers=bearer(issued.token))
    assert response.status_code == 401
    assert response.json["error"]["code"] == "token_expired"
    assert "expired" in response.json["error"]["message"]
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]


def _expire(svc: Services, token_id: str) -> None:
    """Moves a token's expiry into the past, as time would."""
    key = svc.keys.tokens()
    (digest,) = [d for d in svc.redis.hkeys(key) if d.startswith(token_id)]
    record = json.loads(svc.redis.hget(key, digest))
    record["expires_at"] = time.time() - 1
    svc.redis.hset(key, digest, json.dumps(record))


def test_only_a_navigation_resends_an_unchanged_session_cookie(app: Flask, svc: Services) -> None:
    """A background request answering late with an older cookie would drop a flashed message."""
    svc.users.add(*OPERATOR)
    http = _signed_in(app)
    http.get("/usage")  # the CSRF token is made: the session no longer changes on reads
    background = http.get("/api/v1/notifications", headers={"Sec-Fetch-Mode": "cors"})
    assert background.status_code == 200 and "Set-Cookie" not in background.headers
    navigation = http.get("/usage", headers={"Sec-Fetch-Mode": "navigate"})
    assert navigation.status_code == 200 and "Set-Cookie" in navigation.headers
