"""A real `signoff web`: a bad Authorization header never sends a public page round in circles."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from shared.local.embedded_redis import EmbeddedRedis, free_port
from tests.integration.test_web_command import wait_healthy
from tests.stack import ROOT, SIGNOFF

BAD_HEADERS = ["Bearer not-a-token", "Basic YWRhOnB3", "garbage"]


@pytest.fixture(scope="module")
def web_port(redis_server: EmbeddedRedis) -> Iterator[int]:
    port = free_port()
    env = {
        **os.environ,
        "SIGNOFF_REDIS_URL": redis_server.url,
        "SIGNOFF_KEY_PREFIX": "badbearer",
        "SIGNOFF_WEB_PORT": str(port),
        "SIGNOFF_WEB_WORKERS": "1",
        "SIGNOFF_WEB_THREADS": "2",
        "SIGNOFF_SECRET_KEY": "bad-bearer-test-secret-not-for-production",
    }
    web = subprocess.Popen(
        [SIGNOFF, "web"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", web)
        yield port
    finally:
        web.terminate()
        web.wait(timeout=30)


@dataclass(frozen=True)
class Answer:
    status: int
    location: str
    content_type: str
    body: bytes


def _get(port: int, path: str, header: str) -> Answer:
    """One raw GET: http.client follows no redirects."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers={"Authorization": header})
        response = connection.getresponse()
        return Answer(
            response.status,
            response.getheader("Location", ""),
            response.getheader("Content-Type", ""),
            response.read(),
        )
    finally:
        connection.close()


@pytest.mark.parametrize("header", BAD_HEADERS)
def test_public_endpoints_answer_despite_a_bad_header(web_port: int, header: str) -> None:
    health = _get(web_port, "/healthz", header)
    assert health.status == 200
    assert json.loads(health.body)["status"] == "ok"
    sign_in = _get(web_port, "/sign-in", header)
    assert sign_in.status == 200 and b'name="csrf_token"' in sign_in.body


@pytest.mark.parametrize("header", BAD_HEADERS)
def test_a_protected_page_redirects_once_then_sign_in_renders(web_port: int, header: str) -> None:
    path = "/conversations"
    for _ in range(3):
        response = _get(web_port, path, header)
        if response.status != 302:
            break
        location = response.location
        assert location.split("?")[0] != path.split("?")[0], f"{path} redirects to itself"
        path = location.removeprefix(f"http://127.0.0.1:{web_port}")
    assert response.status == 200
    assert path.startswith("/sign-in")


@pytest.mark.parametrize("header", BAD_HEADERS)
def test_a_protected_api_route_stays_a_json_401(web_port: int, header: str) -> None:
    response = _get(web_port, "/api/v1/conversations", header)
    assert response.status == 401
    assert response.content_type.startswith("application/json")
    assert json.loads(response.body)["error"]["code"] == "unauthorized"
