"""Web fixtures: apps on the real test Redis (each with its own key prefix), tokens, sign-in."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from jsonschema import Draft202012Validator, FormatChecker

from shared.local.embedded_redis import EmbeddedRedis
from shared.models.events import EventBase
from shared.models.users import Role
from shared.settings import Settings
from shared.store.emit import EMIT_LUA, encode_event
from tests.stack import WorkerProcess
from webui import create_app
from webui.services import Services

OPERATOR = ("ada", "correct horse battery")
SECRET = "test-secret-key-not-for-production"

# Writes one event exactly as the stores do: XADD to the stream, PUBLISH to both channels.
_EMIT = EMIT_LUA + "return emit(KEYS[1], ARGV[1], ARGV[2], {ARGV[3], ARGV[4]}, ARGV[5])"

AppFactory = Callable[..., Flask]


def web_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "key_prefix": f"web{uuid.uuid4().hex[:8]}",
        "secret_key": SECRET,
        "sse_heartbeat_s": 0.2,
    }
    return Settings(**(values | overrides))


def body_validator(
    http: FlaskClient, headers: dict[str, str], method: str, path: str
) -> Draft202012Validator:
    """The JSON request body schema the served OpenAPI document gives one operation, so a test
    can check that the document and the server agree on a body."""
    document = http.get("/api/v1/openapi.json", headers=headers).json
    body = document["paths"][path][method]["requestBody"]["content"]["application/json"]
    return Draft202012Validator(
        {**body["schema"], "components": document["components"]}, format_checker=FormatChecker()
    )


def documented(http: FlaskClient, headers: dict[str, str], method: str, path: str) -> set[int]:
    """The status codes the served OpenAPI document lists for one operation."""
    document = http.get("/api/v1/openapi.json", headers=headers).json
    return {int(status) for status in document["paths"][path][method]["responses"]}


def services_of(app: Flask) -> Services:
    svc: Services = app.extensions["signoff"]
    return svc


@pytest.fixture
def make_app(redis_server: EmbeddedRedis) -> Iterator[AppFactory]:
    """Builds apps with setting overrides; closes each one's services afterwards."""
    apps: list[Flask] = []

    def build(**overrides: Any) -> Flask:
        app = create_app(web_settings(**({"redis_url": redis_server.url} | overrides)))
        apps.append(app)
        return app

    yield build
    for app in apps:
        services_of(app).close()


@pytest.fixture
def app(make_app: AppFactory) -> Flask:
    return make_app()


@pytest.fixture
def http(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def svc(app: Flask) -> Services:
    return services_of(app)


@pytest.fixture
def tokens(svc: Services) -> dict[Role, str]:
    return {role: svc.tokens.create(f"{role.value} token", role) for role in Role}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def viewer(tokens: dict[Role, str]) -> dict[str, str]:
    return bearer(tokens[Role.VIEWER])


@pytest.fixture
def submitter(tokens: dict[Role, str]) -> dict[str, str]:
    return bearer(tokens[Role.SUBMITTER])


@pytest.fixture
def operator(tokens: dict[Role, str]) -> dict[str, str]:
    return bearer(tokens[Role.OPERATOR])


def form_csrf(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "page has no CSRF field"
    return match[1]


def sign_in(http: FlaskClient, username: str = OPERATOR[0], password: str = OPERATOR[1]) -> Any:
    page = http.get("/sign-in")
    return http.post(
        "/sign-in",
        data={"username": username, "password": password, "csrf_token": form_csrf(page.text)},
    )


@pytest.fixture
def signed_in(http: FlaskClient, svc: Services) -> FlaskClient:
    """The test client with an operator's session."""
    svc.users.add(*OPERATOR)
    assert sign_in(http).status_code == 302
    return http


def page_csrf(http: FlaskClient) -> str:
    """The session's CSRF token, as a page carries it."""
    return form_csrf(http.get("/usage").text)


def emit(svc: Services, event: EventBase) -> str:
    """Appends an event to its conversation's stream and publishes it; returns the stream id."""
    keys, settings = svc.keys, svc.settings
    cid = event.conversation_id
    args = [settings.stream_maxlen, 60_000, keys.live(cid), keys.live_all(), encode_event(event)]
    stream_id = svc.redis.eval(_EMIT, 1, keys.events(cid), *args)
    return str(stream_id)


def new_conversation(http: FlaskClient, headers: dict[str, str], **options: Any) -> str:
    response = http.post("/api/v1/conversations", json=options, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json["id"])


@pytest.fixture
def redis_client(svc: Services) -> redis.Redis:
    return svc.redis


@pytest.fixture(scope="module")
def stack_app(stack_env: dict[str, str], worker: WorkerProcess) -> Iterator[Flask]:
    """An app on the module's worker's key prefix, so its prompts really run."""
    settings = Settings(
        redis_url=stack_env["SIGNOFF_REDIS_URL"],
        key_prefix=stack_env["SIGNOFF_KEY_PREFIX"],
        secret_key=SECRET,
    )
    app = create_app(settings)
    yield app
    services_of(app).close()


@pytest.fixture(scope="module")
def roles(stack_app: Flask) -> dict[Role, dict[str, str]]:
    """A bearer header per role, on the stack app."""
    svc = services_of(stack_app)
    return {role: bearer(svc.tokens.create(f"{role.value} token", role)) for role in Role}


def wait_for(probe: Callable[[], Any], what: str, timeout_s: float = 15.0) -> Any:
    """The first truthy value of `probe`, polled; fails the test after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def submit_batch(
    http: FlaskClient, headers: dict[str, str], items: list[Any], **body: Any
) -> dict[str, Any]:
    response = http.post("/api/v1/batches", json={"items": items, **body}, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json)


def batch_when(
    http: FlaskClient, headers: dict[str, str], bid: str, done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The batch's detail once `done` holds for it."""

    def probe() -> dict[str, Any] | None:
        detail = http.get(f"/api/v1/batches/{bid}", headers=headers).json
        return detail if done(detail) else None

    return dict(wait_for(probe, f"batch {bid}"))
