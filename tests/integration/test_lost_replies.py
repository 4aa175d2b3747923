"""Writes whose reply is lost (the connection drops after Redis ran them) are not done
twice: not by redis-py sending the command again, not by the work that follows. A worker
reaches Redis through a proxy that can lose one reply; the client reaches it directly."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared.client import Client
from shared.errors import Conflict, InvalidInput, StorageError
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.notifications import Allow
from shared.settings import Settings
from tests.cutting_proxy import CuttingProxy
from tests.stack import WorkerProcess, effect_prompt, parked, run_cli
from worker.lease import Lease
from worker.runtime import _CLAIM, Runtime
from worker.tool_ledger import _CLAIM as _CLAIM_CALL
from worker.writer import _FLUSH

# one Redis: a proxy in front of the one Redis
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]
EFFECT_TOOLS = True  # tests.effect_tools: record_effect writes a line per run

CALC = 'call calculator {"expression": "6*7"}'


@pytest.fixture(scope="module")
def proxy(redis_server: EmbeddedRedis) -> Iterator[CuttingProxy]:
    port = int(redis_server.url.rsplit(":", 1)[1].split("/")[0])
    cutting = CuttingProxy(port)
    yield cutting
    cutting.close()


@pytest.fixture(scope="module")
def worker(stack_env: dict[str, str], proxy: CuttingProxy) -> Iterator[WorkerProcess]:
    """The module's worker, reaching Redis (state and broker) through the proxy."""
    env = {**stack_env, "SIGNOFF_REDIS_URL": proxy.url, "SIGNOFF_LEASE_TTL_MS": "3000"}
    process = WorkerProcess(env).start()
    yield process
    process.stop()


def _steps(client: Client, cid: str) -> list[dict[str, object]]:
    return [json.loads(raw) for raw in client.redis.lrange(client.keys.steps(cid), 0, -1)]


def _each_once(client: Client, cid: str) -> None:
    steps = _steps(client, cid)
    positions = [step["step_index"] for step in steps]
    assert positions == list(range(len(steps))), positions  # none written twice
    events = client.events.after(cid, count=10_000)
    written = Counter(
        (e.step.step_index, e.step.status.value)  # type: ignore[attr-defined]
        for e in events
        if e.kind == "step"
    )
    assert all(count == 1 for count in written.values()), written


def test_a_prompt_whose_acceptance_was_lost_is_queued_once(
    stack_env: dict[str, str], proxy: CuttingProxy, worker: WorkerProcess
) -> None:
    settings = Settings(redis_url=proxy.url, key_prefix=f"cut{uuid.uuid4().hex[:8]}")
    with Client(settings) as through:
        conversation = through.new_conversation()
        proxy.cut_reply_to(b"double-text policy (ConversationStore.submit)")  # its script
        with pytest.raises(StorageError):
            conversation.send("only once, please")
        cid = conversation.conversation_id
        assert through.redis.llen(through.keys.inbox(cid)) == 1  # never queued twice
        assert through.redis.scard(through.keys.turn_ids(cid)) == 1


def test_a_sender_retries_a_lost_prompt_under_its_turn_id_and_it_runs_once(
    stack_env: dict[str, str], proxy: CuttingProxy, worker: WorkerProcess
) -> None:
    settings = Settings(redis_url=proxy.url, key_prefix=stack_env["SIGNOFF_KEY_PREFIX"])
    with Client(settings) as through:
        conversation = through.new_conversation()
        proxy.cut_reply_to(b"double-text policy (ConversationStore.submit)")
        with pytest.raises(StorageError):  # accepted or not: the sender cannot tell
            conversation.send("count me once", turn_id="retry-me")
        again = conversation.submit("count me once", turn_id="retry-me")
        assert again.turn_id == "retry-me" and again.replayed
        response = conversation.wait_for_turn("retry-me", timeout=60)
        assert response.text.startswith("[demo model]")
        with pytest.raises(Conflict, match="another prompt"):
            conversation.send("a different prompt", turn_id="retry-me")
        cid = conversation.conversation_id
        assert through.redis.smembers(through.keys.turn_ids(cid)) == {"retry-me"}
        _each_once(through, cid)
        with pytest.raises(InvalidInput, match="turn id"):
            conversation.send("hello", turn_id="not an id")


def test_a_flush_whose_reply_was_lost_is_written_once_and_the_turn_ends(
    client: Client, proxy: CuttingProxy, worker: WorkerProcess
) -> None:
    conversation = client.new_conversation(tools={"calculator": "ask"})
    turn = conversation.send(CALC)
    [note] = parked(conversation)
    cuts = proxy.cuts
    proxy.cut_reply_to(_FLUSH.sha.encode())  # the resumed leg's first flush
    client.resolve_notification(note.id, Allow(), actor="alice")
    response = conversation.wait_for_turn(turn, timeout=60)
    assert proxy.cuts == cuts + 1, "no flush reply was lost"
    assert "42" in response.text, response.text + worker.log()[-3000:]
    _each_once(client, conversation.conversation_id)
    results = client.redis.hgetall(client.keys.tool_results(conversation.conversation_id))
    assert len(results) == 1 and '"ok": true' in next(iter(results.values()))


def _ran(effects: Path, note: str) -> int:
    lines = effects.read_text().splitlines() if effects.exists() else []
    return sum(line.endswith(f" {note}") for line in lines)


@pytest.mark.parametrize(
    ("lose", "note"),
    [
        # the claim is made and its leg never hears so: withdrawn, the next leg runs the tool
        (lambda proxy: proxy.cut_reply_to(_CLAIM_CALL.sha.encode()), "claim-lost"),
        # the flush carrying the result never arrives: the outcome is recorded for the next leg
        (lambda proxy: proxy.drop_request(b'recorded\\": \\"result-lost'), "result-lost"),
    ],
)
def test_a_tool_call_around_a_lost_connection_runs_once_and_its_result_is_known(
    client: Client,
    proxy: CuttingProxy,
    worker: WorkerProcess,
    effects: Path,
    lose: Callable[[CuttingProxy], None],
    note: str,
) -> None:
    conversation = client.new_conversation(allow_all=True)
    cuts = proxy.cuts
    lose(proxy)
    turn = conversation.send(effect_prompt(note))
    response = conversation.wait_for_turn(turn, timeout=60)
    assert proxy.cuts == cuts + 1, "nothing was lost"
    assert f'"recorded": "{note}"' in response.text, response.text  # not "effect unknown"
    assert _ran(effects, note) == 1
    _each_once(client, conversation.conversation_id)


def test_a_claim_whose_reply_was_lost_runs_the_turn_once(
    client: Client, proxy: CuttingProxy, worker: WorkerProcess
) -> None:
    conversation = client.new_conversation()
    cuts = proxy.cuts
    proxy.cut_reply_to(_CLAIM.sha.encode())
    turn = conversation.send("a prompt whose claim's answer is lost")
    response = conversation.wait_for_turn(turn, timeout=60)
    assert proxy.cuts == cuts + 1, "no claim reply was lost"
    assert response.text.startswith("[demo model]"), worker.log()[-3000:]
    _each_once(client, conversation.conversation_id)


def test_a_decision_taken_while_the_parking_leg_holds_the_lease_resumes_the_turn(
    stack_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision's own `advance` finds the lease held and is spent ('busy'); letting the
    lease go then says there is work, and the leg sends the `advance` again."""
    settings = Settings(redis_url=stack_env["SIGNOFF_REDIS_URL"], key_prefix="race")
    with Client(settings) as client:
        sent: list[str] = []
        runtime = Runtime(client.settings, client.redis, send_advance=sent.append)
        conversation = client.new_conversation(tools={"calculator": "ask"})
        cid = conversation.conversation_id
        conversation.send(CALC)
        outcomes: list[str] = []
        release = Lease.release

        def decided_before_release(lease: Lease) -> bool:
            [note] = client.conversation(cid).pending_notifications()
            client.resolve_notification(note.id, Allow(), actor="alice")
            outcomes.append(runtime.advance(cid))  # the decision's advance, meanwhile
            return release(lease)

        monkeypatch.setattr(Lease, "release", decided_before_release)
        assert runtime.advance(cid) == "parked"
        assert outcomes == ["busy"] and sent == [cid]  # the leg sent the advance again
        monkeypatch.undo()
        assert runtime.advance(cid) == "finished"
        assert "42" in client.redis.hget(client.keys.history_meta(cid), "last_response")


def test_the_cli_sends_under_a_turn_id_once(stack_env: dict[str, str], client: Client) -> None:
    cid = client.new_conversation().conversation_id
    args = ["submit", "--conversation", cid, "--turn-id", "cli-once", "from the shell"]
    first = run_cli(stack_env, *args)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"conversation_id": cid, "turn_id": "cli-once"}
    again = run_cli(stack_env, *args)
    assert json.loads(again.stdout) == {
        "conversation_id": cid,
        "turn_id": "cli-once",
        "replayed": True,
    }
    assert client.redis.smembers(client.keys.turn_ids(cid)) == {"cli-once"}
    other = run_cli(stack_env, *args[:-1], "another prompt")
    assert other.returncode == 1 and "another prompt" in other.stderr, other.stderr
    alone = run_cli(stack_env, "submit", "--turn-id", "x1", "hi")
    assert alone.returncode == 2 and "--turn-id needs --conversation" in alone.stderr
