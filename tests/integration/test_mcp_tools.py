"""MCP tool servers end to end: real SDK servers (stdio and Streamable HTTP on loopback), a
real worker, the operator's gate in front, and a side-effect file that says exactly which
calls reached the server."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

from shared.client import Client, Conversation
from shared.errors import InvalidInput
from shared.mcp.store import McpServerStore
from shared.models.config import ToolPolicy
from shared.models.events import ConversationStatus
from shared.models.mcp import McpServer, McpServerRequest, McpServerState
from shared.models.notifications import Allow, Deny, NotificationStatus, Submit
from shared.models.steps import Step, StepStatus, StepType
from shared.store.policy import PolicyRule
from tests.stack import ROOT, WorkerProcess, parked, run_cli
from worker.mcp.addresses import guarded_http_client, mcp_policy

SERVER = [sys.executable, "-m", "tests.mcp_test_server"]


@pytest.fixture(scope="module")
def effects_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp") / "effects.jsonl"


STACK_ENV = {
    "SIGNOFF_FLUSH_INTERVAL_MS": "10",
    "SIGNOFF_LEASE_TTL_MS": "1500",
    "SIGNOFF_MCP_CALL_TIMEOUT_S": "3",
    "SIGNOFF_MCP_ALLOWED_HOSTS": "127.0.0.1",
    "SIGNOFF_MCP_ELICIT_WAIT_S": "6",
}


@pytest.fixture
def effects(effects_file: Path) -> Iterator[Path]:
    effects_file.write_text("")
    yield effects_file


@pytest.fixture
def store(client: Client) -> McpServerStore:
    return McpServerStore(client.redis, client.keys)


def calls(effects: Path, tool: str | None = None) -> list[dict[str, object]]:
    """The calls the server received, in order (optionally of one tool)."""
    found = [json.loads(line) for line in effects.read_text().splitlines() if line.strip()]
    return [c for c in found if tool is None or c["tool"] == tool]


def register(
    client: Client, store: McpServerStore, request: McpServerRequest, *, replace: bool = False
) -> McpServer:
    """Registers a server and waits until a worker has listed its tools."""
    store.add(request, actor="test", replace=replace)
    client.tasks.refresh_mcp(request.name)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        server = store.get(request.name)
        if server.refreshed_at is not None:
            return server
        time.sleep(0.05)
    raise AssertionError(f"no worker listed the tools of {request.name}")


def stdio(
    name: str, effects: Path, mode: str = "good", *, trusted: bool = True
) -> McpServerRequest:
    command = " ".join([*SERVER, mode])
    env = {"MCP_TEST_EFFECTS": str(effects)}
    return McpServerRequest(name=name, command=command, env=env, trusted=trusted)


@pytest.fixture
def notes(client: Client, store: McpServerStore, effects: Path) -> McpServer:
    return register(client, store, stdio("notes", effects), replace=True)


def tool_results(conversation: Conversation) -> list[Step]:
    return [s for s in conversation.history if s.type is StepType.TOOL_RESULT]


def test_a_read_only_tool_of_a_trusted_server_runs_unasked(
    client: Client, notes: McpServer, effects: Path
) -> None:
    assert notes.state is McpServerState.CONNECTED
    assert {t.exposed for t in notes.offered()} >= {"notes__list_notes", "notes__delete_note"}
    conversation = client.new_conversation(mcp=["notes"], policy_may_loosen=False)
    response = conversation.chat_to_completion("call notes__list_notes {}")
    [result] = tool_results(conversation)
    assert result.status is StepStatus.DONE
    recorded = json.loads(result.content)["result"]
    assert recorded["server"] == "notes"
    assert recorded["structured_content"] == {"1": "buy milk", "2": "call the bank"}
    assert calls(effects) == [{"tool": "list_notes", "args": {}}]
    assert "notes__list_notes returned" in response.text


def test_a_destructive_tool_parks_and_deny_never_reaches_the_server(
    client: Client, notes: McpServer, effects: Path
) -> None:
    conversation = client.new_conversation(mcp=["notes"], policy_may_loosen=False)
    turn = conversation.send('call notes__delete_note {"id": "1"}')
    [note] = parked(conversation)
    assert note.tool_call is not None and note.tool_call.name == "notes__delete_note"
    assert note.arguments_schema is not None
    assert note.arguments_schema["properties"] == {"id": {"type": "string"}}
    client.resolve_notification(note.id, Deny(reason="keep it"), actor="alice")
    conversation.wait_for_turn(turn, timeout=30)
    assert calls(effects, "delete_note") == []
    [result] = tool_results(conversation)
    assert result.status is StepStatus.CANCELED and "keep it" in result.content


def test_allow_with_edited_arguments_sends_exactly_those(
    client: Client, notes: McpServer, effects: Path
) -> None:
    conversation = client.new_conversation(mcp=["notes/delete_note"], policy_may_loosen=False)
    turn = conversation.send('call notes__delete_note {"id": "1"}')
    [note] = parked(conversation)
    client.resolve_notification(note.id, Allow(arguments={"id": "2"}), actor="alice")
    conversation.wait_for_turn(turn, timeout=30)
    assert calls(effects) == [{"tool": "delete_note", "args": {"id": "2"}}]
    [result] = tool_results(conversation)
    assert "deleted note 2" in result.content


def test_only_selected_tools_are_offered_and_the_operator_rules_apply(
    client: Client, notes: McpServer, effects: Path
) -> None:
    only_delete = client.new_conversation(mcp=["notes/delete_note"], policy_may_loosen=False)
    answer = only_delete.chat_to_completion("call notes__list_notes {}")
    assert "notes__list_notes is not available here" in answer.text  # not offered to the model
    assert tool_results(only_delete) == []
    rule = PolicyRule(tool="notes__list_notes", policy=ToolPolicy.DENY)
    client.stores.policies.set(rule, actor="test")
    try:
        denied = client.new_conversation(mcp=["notes"], allow_all=True)
        denied.chat_to_completion("call notes__list_notes {}")
        [result] = tool_results(denied)
        assert "denied by policy" in result.error
    finally:
        client.stores.policies.remove("notes__list_notes", actor="test")
    assert calls(effects) == []
    untrusted = register(
        client, McpServerStore(client.redis, client.keys), stdio("shy", effects, trusted=False)
    )
    assert untrusted.state is McpServerState.CONNECTED
    catalog = client.stores.policies.catalog()
    assert catalog["shy__list_notes"].default_policy is ToolPolicy.ASK
    assert catalog["notes__list_notes"].default_policy is ToolPolicy.AUTO
    assert catalog["notes__delete_note"].default_policy is ToolPolicy.ASK
    assert catalog["notes__list_notes"].annotations is not None
    assert catalog["notes__list_notes"].annotations.read_only is True
    shy = client.new_conversation(mcp=["shy"], policy_may_loosen=False)
    shy.send("call shy__list_notes {}")
    parked(shy)
    assert calls(effects) == []
    shy.abort()


def test_a_hanging_server_times_out_as_a_tool_error(
    client: Client, notes: McpServer, effects: Path
) -> None:
    conversation = client.new_conversation(mcp=["notes"], allow_all=True)
    started = time.monotonic()
    response = conversation.chat_to_completion("call notes__hang {}")
    assert time.monotonic() - started < 20
    [result] = tool_results(conversation)
    assert result.status is StepStatus.ERROR
    assert "did not answer hang within 3 s" in result.error
    assert "notes__hang failed" in response.text
    assert calls(effects, "hang") == [{"tool": "hang", "args": {}}]


def test_a_server_that_dies_mid_call_is_a_tool_error_and_is_restarted(
    client: Client, notes: McpServer, effects: Path
) -> None:
    conversation = client.new_conversation(mcp=["notes"], allow_all=True)
    conversation.chat_to_completion("call notes__crash {}")
    [crashed] = tool_results(conversation)
    assert crashed.status is StepStatus.ERROR and "effect is unknown" in crashed.error
    conversation.chat_to_completion("call notes__list_notes {}")
    assert tool_results(conversation)[-1].status is StepStatus.DONE
    assert [c["tool"] for c in calls(effects)] == ["crash", "list_notes"]


@contextmanager
def own_worker(
    stack_env: dict[str, str], worker: WorkerProcess, name: str, threads: int = 1, **env: str
) -> Iterator[WorkerProcess]:
    """In place of the module's worker, one with other settings (the module's after)."""
    worker.stop()
    own = WorkerProcess({**stack_env, **env}, concurrency=threads, name=name).start()
    try:
        yield own
    finally:
        own.stop()
        worker.start()


def test_calls_to_one_server_are_bounded_per_worker_process(
    stack_env: dict[str, str],
    worker: WorkerProcess,
    client: Client,
    notes: McpServer,
    effects: Path,
) -> None:
    first, second = (client.new_conversation(mcp=["notes"], allow_all=True) for _ in range(2))
    with own_worker(stack_env, worker, "narrow", threads=2, SIGNOFF_MCP_MAX_CONCURRENCY="1"):
        turns = [(c, c.send("call notes__hang {}")) for c in (first, second)]
        seen: list[float] = []
        deadline = time.monotonic() + 30
        while len(seen) < 2:
            assert time.monotonic() < deadline, f"{len(seen)} of 2 calls reached the server"
            if len(calls(effects, "hang")) > len(seen):
                seen.append(time.monotonic())
            time.sleep(0.02)
        for conversation, turn in turns:
            conversation.wait_for_turn(turn, timeout=30)
    # one call at a time: the second reached the server once the first had timed out (3 s)
    assert seen[1] - seen[0] > 2.5
    errors = [tool_results(c)[0].error for c in (first, second)]
    assert all("did not answer hang within 3 s" in e for e in errors)


def test_a_result_over_the_limit_is_refused_with_a_clear_error(
    stack_env: dict[str, str], worker: WorkerProcess, client: Client, notes: McpServer
) -> None:
    conversation = client.new_conversation(mcp=["notes"], allow_all=True)
    # Writing 100 MB takes the server a while on a busy machine: time enough to be cut off.
    with own_worker(stack_env, worker, "patient", SIGNOFF_MCP_CALL_TIMEOUT_S="120"):
        conversation.chat_to_completion('call notes__big {"size": 2000000}')
        conversation.chat_to_completion('call notes__big {"size": 100000000}')
        conversation.chat_to_completion('call notes__big {"size": 10}')
    over, huge, small = tool_results(conversation)
    assert "over the limit of 1,000,000" in over.error
    assert "over 32,000,000 bytes" in huge.error
    assert small.status is StepStatus.DONE and "xxxxxxxxxx" in small.content


def test_a_hostile_server_is_bounded_and_its_good_tools_work(
    client: Client, store: McpServerStore, effects: Path
) -> None:
    hostile = register(client, store, stdio("hostile", effects, "hostile"), replace=True)
    assert hostile.state is McpServerState.CONNECTED
    problems = {t.name: t.problem for t in hostile.tools if t.problem}
    assert "is 10,428,922 bytes as JSON" in problems["huge_schema"]
    assert "re2" in problems["evil_pattern"]
    assert "listed twice" in problems["fine"]
    assert "which tool 'dotted.name' already is" in problems["dotted_name"]
    assert any("longer than the 64 characters" in p for p in problems.values())
    assert hostile.problems == [
        "the server lists more than 256 tools (SIGNOFF_MCP_MAX_TOOLS); only the first are offered"
    ]
    assert len(hostile.tools) == 256
    conversation = client.new_conversation(mcp=["hostile"], policy_may_loosen=False)
    conversation.chat_to_completion("call hostile__fine {}")
    refused = conversation.chat_to_completion("call hostile__huge_schema {}")
    [fine] = tool_results(conversation)
    assert fine.status is StepStatus.DONE and "fine" in fine.content
    assert "hostile__huge_schema is not available here" in refused.text
    assert calls(effects) == [{"tool": "fine", "args": {}}]


def test_a_tool_that_vanished_is_refused_at_call_time(
    client: Client, store: McpServerStore, effects: Path
) -> None:
    before = register(client, store, stdio("fickle", effects), replace=True)
    conversation = client.new_conversation(mcp=["fickle"], policy_may_loosen=False)
    turn = conversation.send('call fickle__delete_note {"id": "1"}')
    [note] = parked(conversation)
    after = register(client, store, stdio("fickle", effects, "hostile"), replace=True)
    assert "fickle__delete_note" not in {t.exposed for t in after.offered()}
    assert after.created_at > before.created_at
    client.resolve_notification(note.id, Allow(), actor="alice")
    conversation.wait_for_turn(turn, timeout=30)
    [result] = tool_results(conversation)
    assert "is not offered by MCP server 'fickle'" in result.error
    assert calls(effects) == []


def test_a_changed_tool_list_is_noticed_and_offered(
    client: Client, store: McpServerStore, effects: Path
) -> None:
    before = register(client, store, stdio("grower", effects), replace=True)
    assert "grower__extra" not in {t.exposed for t in before.offered()}
    conversation = client.new_conversation(mcp=["grower"], allow_all=True)
    conversation.chat_to_completion("call grower__grow {}")
    deadline = time.monotonic() + 20
    while store.get("grower").tools_version == before.tools_version:
        assert time.monotonic() < deadline, "the list-changed notice was not acted on"
        time.sleep(0.05)
    after = store.get("grower")
    assert after.tools_version == before.tools_version + 1
    assert "grower__extra" in {t.exposed for t in after.offered()}
    assert "grower__extra" in client.stores.policies.catalog()
    conversation.chat_to_completion("call grower__extra {}")
    assert tool_results(conversation)[-1].status is StepStatus.DONE
    assert [c["tool"] for c in calls(effects)] == ["grow", "extra"]


def test_worker_killed_mid_call_reports_effect_unknown_once(
    stack_env: dict[str, str], client: Client, worker: WorkerProcess, effects: Path
) -> None:
    store = McpServerStore(client.redis, client.keys)
    register(client, store, stdio("notes", effects), replace=True)
    conversation = client.new_conversation(mcp=["notes"], allow_all=True)
    with own_worker(stack_env, worker, "doomed", SIGNOFF_MCP_CALL_TIMEOUT_S="120") as doomed:
        turn = conversation.send("call notes__hang {}")
        deadline = time.monotonic() + 30
        while not calls(effects, "hang"):
            assert time.monotonic() < deadline, "the call never reached the server"
            time.sleep(0.05)
        doomed.kill()
        cid = conversation.conversation_id
        deadline = time.monotonic() + 10
        while client.redis.exists(client.keys.lease(cid)):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        rescuer = WorkerProcess(stack_env, concurrency=1, name="rescuer").start()
        try:
            client.tasks.sweep()
            conversation.wait_for_turn(turn, timeout=30)
        finally:
            rescuer.stop()
    [result] = tool_results(conversation)
    assert "effect is unknown" in result.error and "not run again" in result.error
    assert calls(effects, "hang") == [{"tool": "hang", "args": {}}]


def test_an_input_request_parks_is_answered_from_the_inbox_and_reaches_the_server(
    client: Client, notes: McpServer, effects: Path
) -> None:
    conversation = client.new_conversation(mcp=["notes"], allow_all=True)
    turn = conversation.send("call notes__ask_name {}")
    [note] = parked(conversation)
    lease = client.keys.lease(conversation.conversation_id)
    deadline = time.monotonic() + 5  # let go right after the park's flush: no worker waits
    while client.redis.exists(lease):
        assert time.monotonic() < deadline, "the parked conversation still holds its lease"
        time.sleep(0.01)
    assert note.question == "MCP server notes asks: Which name should I greet?"
    assert note.submit_schema is not None and note.submit_schema["required"] == ["name"]
    assert note.tool_call is not None and note.tool_call.name == "notes__ask_name"
    with pytest.raises(InvalidInput, match="submitted content is invalid"):
        client.resolve_notification(note.id, Submit(content={"name": "A"}), actor="alice")
    client.resolve_notification(note.id, Submit(content={"name": "Ada"}), actor="alice")
    conversation.wait_for_turn(turn, timeout=30)
    [result] = tool_results(conversation)
    assert "hello Ada (accept)" in result.content
    assert calls(effects, "ask_name.answer") == [
        {"tool": "ask_name.answer", "args": {"action": "accept", "content": {"name": "Ada"}}}
    ]
    assert len(calls(effects, "ask_name")) == 2  # asked, then answered: one call, two rounds


def test_an_input_request_denied_or_expired_is_declined(
    client: Client, notes: McpServer, effects: Path
) -> None:
    conversation = client.new_conversation(mcp=["notes"], allow_all=True, approval_timeout_s=2)
    turn = conversation.send("call notes__ask_name {}")
    [denied] = parked(conversation)
    client.resolve_notification(denied.id, Deny(reason="not telling"), actor="alice")
    conversation.wait_for_turn(turn, timeout=30)
    turn = conversation.send("call notes__ask_name {}")
    [unanswered] = parked(conversation)
    time.sleep(2.5)
    client.tasks.sweep()  # what `signoff beat` does on its own: the expiry
    conversation.wait_for_turn(turn, timeout=30)
    assert client.notifications.get(unanswered.id).status is NotificationStatus.EXPIRED
    results = [r.content for r in tool_results(conversation)]
    assert len(results) == 2 and all("(decline)" in r for r in results)
    answers = [c["args"] for c in calls(effects, "ask_name.answer")]
    assert answers == [{"action": "decline", "content": None}] * 2


def test_an_older_server_asking_inside_the_call_is_answered_while_the_call_waits(
    client: Client, store: McpServerStore, effects: Path
) -> None:
    old = McpServerRequest(
        name="old",
        command=" ".join([*SERVER, "good", "--legacy"]),
        env={"MCP_TEST_EFFECTS": str(effects)},
    )
    register(client, store, old, replace=True)
    conversation = client.new_conversation(mcp=["old"], allow_all=True)
    turn = conversation.send("call old__ask_name {}")
    deadline = time.monotonic() + 20
    while not (pending := conversation.pending_notifications()):
        assert time.monotonic() < deadline, "the server's question did not reach the inbox"
        time.sleep(0.05)
    [note] = pending
    assert note.question == "Which name should I greet?" and note.title == (
        "MCP server old asks for input"
    )
    # The call is live inside the server: the conversation runs (holds its worker) meanwhile.
    assert conversation.status is ConversationStatus.RUNNING
    client.resolve_notification(note.id, Submit(content={"name": "Grace"}), actor="alice")
    conversation.wait_for_turn(turn, timeout=30)
    assert "hello Grace (accept)" in tool_results(conversation)[0].content
    started = time.monotonic()
    turn = conversation.send("call old__ask_name {}")  # unanswered this time
    conversation.wait_for_turn(turn, timeout=30)
    assert 5 < time.monotonic() - started < 20  # SIGNOFF_MCP_ELICIT_WAIT_S is 6
    assert "hello None (decline)" in tool_results(conversation)[1].content
    assert [c["args"] for c in calls(effects, "ask_name.answer")] == [
        {"action": "accept", "content": {"name": "Grace"}},
        {"action": "decline", "content": None},
    ]


@pytest.fixture(scope="module")
def http_server(effects_file: Path) -> Iterator[str]:
    yield from _http_server(effects_file)


@pytest.fixture(scope="module")
def json_http_server(effects_file: Path) -> Iterator[str]:
    """A server that answers each call with one plain JSON body, not an event stream."""
    yield from _http_server(effects_file, "--json")


def _http_server(effects_file: Path, *flags: str) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "MCP_TEST_EFFECTS": str(effects_file)}
    argv = [*SERVER, "good", "--http", str(port), *flags]
    process = subprocess.Popen(argv, cwd=ROOT, env=env)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the HTTP MCP server did not start"
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.kill()
    process.wait()


def test_streamable_http_read_only_runs_and_destructive_parks(
    client: Client, store: McpServerStore, http_server: str, effects: Path
) -> None:
    request = McpServerRequest(
        name="web", url=http_server, headers={"Authorization": "Bearer s3cret-token"}, trusted=True
    )
    server = register(client, store, request, replace=True)
    assert server.state is McpServerState.CONNECTED, server.last_error
    assert "s3cret-token" not in store.get("web").model_dump_json()
    conversation = client.new_conversation(mcp=["web"], policy_may_loosen=False)
    conversation.chat_to_completion("call web__list_notes {}")
    assert json.loads(tool_results(conversation)[0].content)["result"]["server"] == "web"
    turn = conversation.send('call web__delete_note {"id": "2"}')
    [note] = parked(conversation)
    client.resolve_notification(note.id, Allow(), actor="alice")
    conversation.wait_for_turn(turn, timeout=30)
    assert calls(effects) == [
        {"tool": "list_notes", "args": {}},
        {"tool": "delete_note", "args": {"id": "2"}},
    ]


def test_a_url_on_an_address_not_allowed_is_refused(
    client: Client, store: McpServerStore, http_server: str
) -> None:
    elsewhere = http_server.replace("127.0.0.1", "127.0.0.2")
    server = register(client, store, McpServerRequest(name="sneaky", url=elsewhere), replace=True)
    assert server.state is McpServerState.FAILING
    assert "SIGNOFF_MCP_ALLOWED_HOSTS" in server.last_error and "127.0.0.2" in server.last_error


def test_the_http_client_checks_every_connection(http_server: str) -> None:
    async def get(allowed: tuple[str, ...]) -> int:
        async with guarded_http_client(mcp_policy(allowed)) as http:
            return (await http.get(http_server)).status_code

    with pytest.raises(httpx2.ConnectError, match="SIGNOFF_MCP_ALLOWED_HOSTS"):
        asyncio.run(get(()))
    assert asyncio.run(get(("127.0.0.1",))) < 500  # reached: the server answered


def test_the_cli_registers_shows_and_removes_without_showing_secrets(
    stack_env: dict[str, str], client: Client, effects: Path
) -> None:
    command = " ".join([*SERVER, "good"])
    added = run_cli(
        stack_env, "mcp", "add", "clinotes", "--command", command,
        "--env", f"MCP_TEST_EFFECTS={effects}", "--env", "API_KEY=very-secret-value", "--trusted",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "connected" in added.stdout and "clinotes__list_notes" in added.stdout
    assert "default auto" in added.stdout and "read-only" in added.stdout
    shown = run_cli(stack_env, "mcp", "show", "clinotes")
    listed = run_cli(stack_env, "mcp", "list")
    for output in (added, shown, listed):
        assert "very-secret-value" not in output.stdout + output.stderr
    assert "API_KEY, MCP_TEST_EFFECTS (values hidden)" in shown.stdout
    assert "clinotes" in listed.stdout and "connected" in listed.stdout
    again = run_cli(stack_env, "mcp", "add", "clinotes", "--command", command)
    assert again.returncode == 1 and "already registered" in again.stderr
    both = run_cli(stack_env, "mcp", "add", "x", "--command", "a", "--url", "http://h/")
    assert both.returncode == 1 and "exactly one" in both.stderr
    bad = run_cli(stack_env, "mcp", "add", "bad__name", "--command", "a")
    assert bad.returncode == 1 and "name" in bad.stderr
    refreshed = run_cli(stack_env, "mcp", "refresh", "clinotes")
    assert refreshed.returncode == 0 and "tools version 1" in refreshed.stdout
    removed = run_cli(stack_env, "mcp", "remove", "clinotes")
    assert removed.returncode == 0
    assert "clinotes__list_notes" not in client.stores.policies.catalog()
    gone = run_cli(stack_env, "mcp", "show", "clinotes")
    assert gone.returncode == 2 and "no MCP server named 'clinotes'" in gone.stderr


def test_a_huge_plain_json_answer_over_http_is_cut_at_the_bound(
    stack_env: dict[str, str],
    worker: WorkerProcess,
    client: Client,
    store: McpServerStore,
    json_http_server: str,
) -> None:
    """The SDK reads a JSON answer whole: the HTTP client must stop reading first."""
    register(client, store, McpServerRequest(name="plain", url=json_http_server), replace=True)
    conversation = client.new_conversation(mcp=["plain"], allow_all=True)
    with own_worker(stack_env, worker, "patient-http", SIGNOFF_MCP_CALL_TIMEOUT_S="120"):
        conversation.chat_to_completion('call plain__big {"size": 100000000}')
        conversation.chat_to_completion('call plain__big {"size": 10}')
    huge, small = tool_results(conversation)
    assert "its answer is over 64,000,000 bytes and was not read further" in huge.error
    assert small.status is StepStatus.DONE and "xxxxxxxxxx" in small.content
