"""OpenTelemetry traces of real processes, received by an OTLP/HTTP endpoint on loopback.

A prompt sent through `signoff web` whose tool call waits for an approval is one trace
across the two `advance` tasks before and after the park: the root `invoke_agent` span,
its `chat` and `execute_tool` spans (with the decision, the approver and the wait) and the
wait itself, all with the ids the turn's checkpoint kept; the root links to the task that
started the turn, which is in the trace of the web request that queued it. Prompts,
answers and tool arguments are on no span unless an operator opts in.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from shared.client import Client
from shared.local.embedded_redis import free_port
from shared.models.notifications import Allow
from shared.models.users import Role
from shared.store.keys import KeySpace
from shared.store.users import TokenStore
from tests.integration.test_cli_approvals import doctor_lines
from tests.integration.test_web_command import wait_healthy
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.stack import ROOT, SIGNOFF, WorkerProcess, effect_prompt, parked, run_cli

pytestmark = pytest.mark.integration

EFFECT_TOOLS = True  # tests.effect_tools: record_effect
NOTE = "secret-plans-for-the-board"


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    found = OtlpReceiver()
    yield found
    found.close()


def traced(stack_env: dict[str, str], receiver: OtlpReceiver) -> dict[str, str]:
    return {
        **stack_env,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }


@pytest.fixture(scope="module")
def worker(stack_env: dict[str, str], receiver: OtlpReceiver) -> Iterator[WorkerProcess]:
    process = WorkerProcess(traced(stack_env, receiver)).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def web(stack_env: dict[str, str], receiver: OtlpReceiver) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        **traced(stack_env, receiver),
        "SIGNOFF_WEB_PORT": str(port),
        "SIGNOFF_WEB_WORKERS": "1",
        "SIGNOFF_SECRET_KEY": "k" * 32,
    }
    process = subprocess.Popen(
        [SIGNOFF, "web"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def post(url: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        found: dict[str, Any] = json.loads(response.read())
        return found


def in_trace(receiver: OtlpReceiver, trace_id: str) -> list[ReceivedSpan]:
    return [s for s in receiver.spans if s.trace_id == trace_id]


def test_an_approved_call_is_one_trace_across_the_park(
    client: Client, worker: WorkerProcess, web: str, receiver: OtlpReceiver
) -> None:
    token = TokenStore(client.redis, KeySpace(client.keys.prefix)).create("tracer", Role.OPERATOR)
    cid = str(post(f"{web}/api/v1/conversations", token, {"tools": {"record_effect": "ask"}})["id"])
    sent = post(f"{web}/api/v1/conversations/{cid}/prompts", token, {"text": effect_prompt(NOTE)})
    conversation = client.conversation(cid)
    [note] = parked(conversation)
    time.sleep(0.2)  # a wait the trace must show
    client.resolve_notification(note.id, Allow(), actor="alice")
    response = conversation.wait_for_turn(sent["turn_id"], timeout=30)

    [root] = [
        s
        for s in receiver.wait_for("invoke_agent")
        if s.attributes["signoff.turn.id"] == response.turn_id
    ]
    assert root.service == "signoff-worker" and root.parent_span_id == ""
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.conversation.id"] == cid
    assert root.attributes["signoff.turn.status"] == "completed"
    assert (
        root.attributes["gen_ai.usage.input_tokens"] == response.usage_metadata.prompt_token_count
    )  # type: ignore[union-attr]
    spans = in_trace(receiver, root.trace_id)
    children = [s for s in spans if s.span_id != root.span_id]
    assert all(s.parent_span_id == root.span_id for s in children)
    assert all(root.start_ns <= s.start_ns and s.end_ns <= root.end_ns for s in children)
    chats = sorted((s for s in children if s.name == "chat signoff-demo"), key=lambda s: s.start_ns)
    assert len(chats) == 2  # the call that asked for the tool, and the answer after it ran
    assert all(s.attributes["gen_ai.operation.name"] == "chat" for s in chats)
    assert chats[0].attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert chats[1].attributes["gen_ai.response.finish_reasons"] == ["stop"]
    [tool] = [s for s in children if s.name == "execute_tool record_effect"]
    [waited] = [s for s in children if s.name == "await_approval record_effect"]
    assert tool.attributes["gen_ai.tool.call.id"] == note.tool_call.id  # type: ignore[union-attr]
    assert tool.attributes["signoff.tool.outcome"] == "allowed"
    assert tool.attributes["signoff.approval.approver"] == "alice"
    assert tool.attributes["signoff.approval.wait_s"] >= 0.2
    assert chats[0].end_ns <= waited.start_ns < waited.end_ns <= tool.start_ns <= chats[1].start_ns
    assert waited.end_ns - waited.start_ns >= 200_000_000

    # two `advance` tasks ran the turn: the park's and the resume's
    legs = [s for s in receiver.wait_for("run/signoff.advance", count=2)]
    assert len({s.trace_id for s in legs}) >= 2
    # the root links to the task that started the turn, in the trace of the web request
    [(linked_trace, linked_span)] = root.links
    [started] = [s for s in legs if s.span_id == linked_span]
    requests = [s for s in receiver.spans if s.service == "signoff-web"]
    assert any(r.trace_id == linked_trace == started.trace_id for r in requests)
    # no content unless an operator opts in
    everything = json.dumps([s.attributes for s in spans])
    assert NOTE not in everything and "gen_ai.input.messages" not in everything
    assert "gen_ai.tool.call.arguments" not in everything


def test_doctor_says_where_traces_go(stack_env: dict[str, str], receiver: OtlpReceiver) -> None:
    result = run_cli(traced(stack_env, receiver), "doctor")
    line = doctor_lines(result)["tracing"]
    assert line == f"ok on: OTLP/HTTP to {receiver.endpoint}, without contents"
