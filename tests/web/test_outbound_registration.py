"""Registering a webhook endpoint on a loopback, private, link-local or metadata address is a
422 naming the URL and the allow-list setting, unless the operator allowed it."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from shared.store.webhooks import EndpointStore
from tests.web.conftest import AppFactory, bearer, services_of

INTERNAL = [
    "http://127.0.0.1:6379/",  # Redis's port
    "http://localhost/hook",  # a name that resolves to loopback
    "http://2130706433/hook",  # 127.0.0.1, written as one decimal number
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://10.1.2.3/hook",
    "http://[::1]:8080/hook",
    "http://0x7f000001:8080/hook",  # 127.0.0.1 in hex
    "http://0.0.0.0/hook",
]


def _register(http: FlaskClient, headers: dict[str, str], url: str) -> Any:
    body = {"url": url, "events": ["turn.completed"]}
    return http.post("/api/v1/webhooks/endpoints", json=body, headers=headers)


@pytest.mark.parametrize("url", INTERNAL)
def test_registering_an_internal_address_is_a_422_naming_the_setting(
    make_app: AppFactory, url: str
) -> None:
    app = make_app()
    svc = services_of(app)
    operator = bearer(svc.tokens.create("op", "operator"))
    answer = _register(app.test_client(), operator, url)
    assert answer.status_code == 422, answer.text
    message = answer.json["error"]["message"]
    assert message.startswith("url: ") and "SIGNOFF_OUTBOUND_ALLOW" in message, message
    assert EndpointStore(svc.redis, svc.keys).all() == []


def test_the_allow_list_lets_an_operator_choose_internal_targets(make_app: AppFactory) -> None:
    app = make_app(outbound_allow=("127.0.0.0/8", "localhost"))
    operator = bearer(services_of(app).tokens.create("op", "operator"))
    http = app.test_client()
    for url in ("http://127.0.0.1:6379/", "http://localhost/hook", "http://2130706433/x"):
        assert _register(http, operator, url).status_code == 201, url
    assert _register(http, operator, "http://10.1.2.3/hook").status_code == 422
    assert _register(http, operator, "https://hooks.example.test/x").status_code == 201
