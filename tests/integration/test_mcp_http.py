"""The web's /mcp on a real `signoff web` (gunicorn, gevent workers), a real worker and Redis.

The SDK's own client over Streamable HTTP makes the same round trip as over stdio:
a submitter starts work that parks, an operator allows it with edited arguments, the
submitter reads the answer. Requests without a valid bearer token get a 401 in JSON;
no body, however malformed or large, gets a 500.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from shared.local.embedded_redis import free_port
from tests.integration.test_web_command import wait_healthy
from tests.mcp_hosts import (
    McpHost,
    allow_edited,
    completed_answer,
    over_http,
    role_tokens,
    start_and_park,
    text_of,
)
from tests.stack import ROOT, SIGNOFF, WorkerProcess

pytestmark = pytest.mark.timeout(180)

Tokens = dict[str, str]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def tokens(stack_env: dict[str, str]) -> Tokens:
    return role_tokens(stack_env, "http")


@pytest.fixture(scope="module")
def web(stack_env: dict[str, str]) -> Iterator[str]:
    """`signoff web` with two gevent workers on the module's Redis; its /mcp URL."""
    port = free_port()
    env = {
        **os.environ,
        **stack_env,
        "SIGNOFF_WEB_PORT": str(port),
        "SIGNOFF_WEB_WORKERS": "2",
        "SIGNOFF_SECRET_KEY": "x" * 32,
        "SIGNOFF_MAX_PROMPT_MEDIA_BYTES": "1000",  # a small body cap, to test it
        "SIGNOFF_MAX_PROMPT_TEXT_BYTES": "1000",
    }
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"signoff-web-mcp-{port}.log"
    process = subprocess.Popen(
        [SIGNOFF, "web"], cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)
        assert "Traceback" not in log.read_text(), log.read_text()


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def announce_large_body(
    url: str, headers: dict[str, str], size: int
) -> tuple[int, dict[str, str], bytes]:
    """Headers announcing a body of `size` bytes and the first of them: the server answers
    before reading the rest (and closes the connection)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.putrequest("POST", parts.path)
    for name, value in {**headers, "Content-Length": str(size)}.items():
        connection.putheader(name, value)
    connection.endheaders(b"{" + b" " * 1000)
    response = connection.getresponse()
    answer = response.status, dict(response.headers), response.read()
    connection.close()
    return answer


def chunked_body(url: str, headers: dict[str, str], size: int) -> tuple[int, dict[str, str], bytes]:
    """A body of `size` bytes sent chunked (no Content-Length), as long as the server reads."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    chunks = (b" " * 65_536 for _ in range(size // 65_536))
    with contextlib.suppress(OSError):  # the server answered and closed before taking it all
        connection.request("POST", parts.path, body=chunks, headers=headers, encode_chunked=True)
    response = connection.getresponse()
    answer = response.status, dict(response.headers), response.read()
    connection.close()
    return answer


@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "per-request"])
def test_the_round_trip_over_streamable_http(
    worker: WorkerProcess, web: str, tokens: Tokens, modern: bool
) -> None:
    """Both eras of the protocol: a ClientSession's `initialize` handshake, and the SDK's
    Client negotiating the 2026-07-28 revision (no handshake, no session)."""

    async def submit(host: McpHost) -> tuple[str, str, str]:
        assert "resolve_approval" not in await host.tool_names()
        cid, turn_id, approval_id = await start_and_park(host)
        refused = await host.refused("resolve_approval", approval_id=approval_id, decision="allow")
        assert "needs the approver role" in refused
        return cid, turn_id, approval_id

    cid, turn_id, approval_id = over_http(web, tokens["submitter"], submit, modern=modern)

    async def approve(host: McpHost) -> None:
        await allow_edited(host, cid, approval_id)

    over_http(web, tokens["operator"], approve, modern=modern)

    async def read(host: McpHost) -> str:
        return await completed_answer(host, cid, turn_id)

    answer = over_http(web, tokens["viewer"], read, modern=modern)
    assert "lead@example.com" in answer and "ops@example.com" not in answer


def test_a_viewer_reads_but_cannot_start(worker: WorkerProcess, web: str, tokens: Tokens) -> None:
    async def as_viewer(host: McpHost) -> None:
        assert await host.tool_names() == {"get_conversation", "list_pending_approvals"}
        refused = await host.refused("start_conversation", prompt="hello")
        assert "needs the submitter role" in refused
        await host.ok("list_pending_approvals", limit=5)

    over_http(web, tokens["viewer"], as_viewer)


def test_no_valid_bearer_token_is_a_401_in_json(web: str, tokens: Tokens) -> None:
    body = json.dumps(INITIALIZE).encode()
    for headers in (
        MCP_HEADERS,
        {**MCP_HEADERS, "Authorization": "Bearer so_not-a-token"},
        {**MCP_HEADERS, "Authorization": f"Basic {tokens['operator']}"},
    ):
        status, answer_headers, answer = post(web, body, headers)
        assert status == 401, (headers, answer)
        assert answer_headers["Content-Type"] == "application/json"
        assert json.loads(answer)["error"]["code"] == "unauthorized"
    status, _, answer = post(
        web, body, {**MCP_HEADERS, "Authorization": f"Bearer {tokens['viewer']}"}
    )
    assert status == 200 and json.loads(answer)["result"]["serverInfo"]["name"] == "signoff"


def test_no_body_is_a_500(web: str, tokens: Tokens) -> None:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {tokens['operator']}"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    bodies = [
        b"",
        b"{",
        b"\xff\xfe\x00garbage",
        b"[]",
        b"null",
        b'"text"',
        b'{"jsonrpc": "2.0"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "no/such"}',
        json.dumps([INITIALIZE, INITIALIZE]).encode(),
        json.dumps({**call, "params": {"name": "resolve_approval", "arguments": []}}).encode(),
        json.dumps(
            {**call, "params": {"name": "get_conversation", "arguments": {"x": 1}}}
        ).encode(),
        json.dumps({**call, "params": {"name": 7}}).encode(),
        json.dumps(
            {**call, "params": {"name": "start_conversation", "arguments": {"prompt": 1}}}
        ).encode(),
        json.dumps({**INITIALIZE, "params": {"protocolVersion": 5}}).encode(),
    ]
    for body in bodies:
        status, _, answer = post(web, body, headers)
        assert status < 500, (body, status, answer)
    status, answer_headers, answer = announce_large_body(web, headers, 5_000_000)
    assert status == 413 and answer_headers["Content-Type"] == "application/json", answer
    status, answer_headers, answer = chunked_body(web, headers, 5_000_000)
    assert status == 413 and answer_headers["Content-Type"] == "application/json", answer
    for method in ("GET", "DELETE", "PUT"):  # stateless: no stream to GET, no session to DELETE
        request = urllib.request.Request(web, headers=headers, method=method)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 405 and "POST" in refused.value.headers["Allow"], method


def test_concurrent_hosts_are_all_answered_as_themselves(
    worker: WorkerProcess, web: str, tokens: Tokens
) -> None:
    """Twenty hosts at once on two gevent workers, viewers and operators mixed: each gets its
    own answers, and each request acts as its own token (a resolve is refused to a viewer)."""

    async def one(index: int, seen: list[int]) -> None:
        role = "viewer" if index % 2 else "operator"

        async def body(host: McpHost) -> None:
            for _ in range(3):
                listed = await host.ok("list_pending_approvals", limit=1, offset=index)
                assert listed["offset"] == index
                resolve = await host.call(
                    "resolve_approval", approval_id="nobody.here", decision="allow"
                )
                expected = "needs the approver role" if role == "viewer" else "not_found"
                assert resolve.is_error and expected in text_of(resolve), (role, resolve)
            seen.append(index)

        await anyio.to_thread.run_sync(lambda: over_http(web, tokens[role], body))

    async def main() -> list[int]:
        seen: list[int] = []
        async with anyio.create_task_group() as group:
            for index in range(20):
                group.start_soon(one, index, seen)
        return seen

    assert sorted(anyio.run(main)) == list(range(20))
