"""Against a real `signoff web`: `next` stays on the site, and ended sessions stay ended.

Requests go over a raw HTTP connection, so the test reads the exact Location header
and replays exactly the cookie and CSRF token a browser held.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote, urlencode

import pytest
import redis

from shared.local.embedded_redis import EmbeddedRedis, free_port
from shared.store.keys import KeySpace
from shared.store.users import TokenStore
from tests.integration.test_web_command import wait_healthy
from tests.stack import ROOT, SIGNOFF, state_store

ADMIN_PASSWORD = "correct horse battery"
CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass(frozen=True)
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: str


@dataclass(frozen=True)
class Web:
    port: int
    env: dict[str, str]
    keys: KeySpace
    redis: redis.Redis

    def request(
        self,
        method: str,
        path: str,
        *,
        cookie: str | None = None,
        form: dict[str, str] | str | None = None,
        json_body: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        """One request on a fresh connection; a `form` string is sent exactly as given."""
        sent = dict(headers or {})
        body = None
        if cookie:
            sent["Cookie"] = f"signoff_session={cookie}"
        if form is not None:
            body = form if isinstance(form, str) else urlencode(form)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        if json_body is not None:
            body = json_body
            sent["Content-Type"] = "application/json"
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            return Answer(response.status, response.headers, response.read().decode())
        finally:
            connection.close()

    def operator(self) -> dict[str, str]:
        """A bearer header of a fresh operator token."""
        token = TokenStore(self.redis, self.keys).create("test operator", "operator")
        return {"Authorization": f"Bearer {token}"}


def session_cookie(answer: Answer, current: str | None = None) -> str | None:
    """The session cookie an answer sets (None when it deletes it), else the current one."""
    for header in answer.headers.get_all("Set-Cookie") or []:
        name, _, rest = header.partition("=")
        if name == "signoff_session":
            return rest.split(";", 1)[0] or None
    return current


@pytest.fixture(scope="module")
def web(redis_server: EmbeddedRedis) -> Iterator[Web]:
    port = free_port()
    env = {
        **os.environ,
        "SIGNOFF_REDIS_URL": redis_server.url,
        "SIGNOFF_KEY_PREFIX": f"websess{uuid.uuid4().hex[:8]}",
        "SIGNOFF_WEB_PORT": str(port),
        "SIGNOFF_WEB_WORKERS": "2",
        "SIGNOFF_WEB_THREADS": "4",
        "SIGNOFF_SECRET_KEY": "integration-test-secret-key-0123456789",
        "SIGNOFF_ADMIN_PASSWORD": ADMIN_PASSWORD,
        # every test here signs in from 127.0.0.1 as admin, several times
        "SIGNOFF_LOGIN_ATTEMPTS_PER_MINUTE": "1000",
        "SIGNOFF_LOGIN_ATTEMPTS_PER_USER_PER_MINUTE": "1000",
    }
    process = subprocess.Popen(
        [SIGNOFF, "web"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    client, keys = state_store(redis_server.url, env["SIGNOFF_KEY_PREFIX"])
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process)
        yield Web(port, env, keys, client)
    finally:
        process.terminate()
        process.wait(timeout=30)
        client.close()


def sign_in(web: Web, *, password: str = ADMIN_PASSWORD, next_raw: str = "") -> tuple[Answer, str]:
    """Signs in as a browser does (form, cookie, CSRF field); returns the answer and cookie.

    `next_raw` goes into the form body as it is, already percent-encoded.
    """
    form = web.request("GET", "/sign-in")
    cookie = session_cookie(form)
    csrf = CSRF_FIELD.search(form.body)[1]  # type: ignore[index]
    body = urlencode({"username": "admin", "password": password, "csrf_token": csrf})
    answer = web.request("POST", "/sign-in", cookie=cookie, form=f"{body}&next={next_raw}")
    signed_in = session_cookie(answer, cookie)
    assert answer.status == 302 and signed_in, answer.status
    return answer, signed_in


@pytest.mark.parametrize(
    "raw", ["/%09/evil.example", "/%0D%0A/evil.example", "%2F%5Cevil.example", "//evil.example"]
)
def test_sign_in_redirects_only_to_this_site(web: Web, raw: str) -> None:
    answer, _ = sign_in(web, next_raw=raw)
    assert answer.status == 302
    assert answer.headers["Location"] == "/"
    form = web.request("GET", f"/sign-in?next={raw}")
    assert form.status == 200 and 'name="next" value="/"' in form.body
    kept, _ = sign_in(web, next_raw=quote("/usage?day=1", safe=""))
    assert kept.headers["Location"] == "/usage?day=1"


def page_csrf(web: Web, cookie: str) -> str:
    page = web.request("GET", "/usage", cookie=cookie)
    assert page.status == 200, page.status
    return CSRF_FIELD.search(page.body)[1]  # type: ignore[index]


def assert_refused(web: Web, cookie: str, csrf: str) -> None:
    """A page sends the browser to sign-in; a form POST and an API POST change nothing."""
    page = web.request("GET", "/usage", cookie=cookie)
    assert page.status == 302 and page.headers["Location"].startswith("/sign-in")
    operator = web.operator()
    made = web.request("POST", "/api/v1/conversations", json_body="{}", headers=operator)
    cid = json.loads(made.body)["id"]
    close = web.request(
        "POST", f"/conversations/{cid}/close", cookie=cookie, form={"csrf_token": csrf}
    )
    assert close.status == 302 and close.headers["Location"].startswith("/sign-in")
    state = web.request("GET", f"/api/v1/conversations/{cid}", headers=operator)
    assert json.loads(state.body)["closed"] is False
    api = web.request(
        "POST",
        "/api/v1/conversations",
        cookie=cookie,
        json_body="{}",
        headers={"X-CSRF-Token": csrf},
    )
    assert api.status == 401


def test_signed_out_cookie_and_csrf_token_are_refused(web: Web) -> None:
    _, cookie = sign_in(web)
    csrf = page_csrf(web, cookie)
    out = web.request("POST", "/sign-out", cookie=cookie, form={"csrf_token": csrf})
    assert out.status == 302
    assert_refused(web, cookie, csrf)


def test_password_change_ends_the_session(web: Web) -> None:
    _, cookie = sign_in(web)
    csrf = page_csrf(web, cookie)
    changed = subprocess.run(
        [SIGNOFF, "user", "passwd", "admin", "--password", "a new admin password"],
        env=web.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert changed.returncode == 0, changed.stderr
    try:
        assert_refused(web, cookie, csrf)
        answer, fresh = sign_in(web, password="a new admin password")
        assert answer.status == 302 and page_csrf(web, fresh)
    finally:
        subprocess.run(
            [SIGNOFF, "user", "passwd", "admin", "--password", ADMIN_PASSWORD],
            env=web.env,
            cwd=ROOT,
            check=True,
            capture_output=True,
            timeout=60,
        )


def test_disabled_admin_cannot_sign_in(web: Web) -> None:
    _, cookie = sign_in(web)
    csrf = page_csrf(web, cookie)
    operator = web.operator()
    disabled = web.request("POST", "/api/v1/users/admin/disable", headers=operator)
    assert disabled.status == 200
    try:
        assert_refused(web, cookie, csrf)
        form = web.request("GET", "/sign-in")
        fields = {
            "username": "admin",
            "password": ADMIN_PASSWORD,
            "csrf_token": CSRF_FIELD.search(form.body)[1],  # type: ignore[index]
        }
        refused = web.request("POST", "/sign-in", cookie=session_cookie(form), form=fields)
        assert refused.status == 403 and "disabled" in refused.body
    finally:
        web.request("POST", "/api/v1/users/admin/enable", headers=operator)
