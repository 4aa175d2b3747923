"""State on a real three-primary Redis Cluster, Celery's broker on a Redis of its own.

Every script, transaction and multi-key command of a conversation's life must touch one
slot, or the cluster refuses it (CROSSSLOT); a conversation's keys and its shard's copies of
the global structures share the shard's slot, and the shards spread over the three nodes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.crc import key_slot

from shared.client import Client
from shared.errors import StorageError, TurnFailed
from shared.local.embedded_cluster import RedisClusterNodes
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.budgets import BudgetKind, BudgetSpec
from shared.models.config import ToolPolicy
from shared.models.notifications import Allow, NotificationKind
from shared.models.steps import StepStatus, StepType
from shared.models.users import Role
from shared.settings import Settings
from shared.store.keys import KeySpace
from shared.store.policy import PolicyRule, PolicyStore
from tests.stack import BeatProcess, WorkerProcess, effect_prompt, parked, run_cli
from tests.unit.test_delta_tick import deltas_in_stream, streamer_for
from tests.web.test_sse import SseReader
from webui import create_app
from webui.services import Services
from worker.deltas import DeltaFlusher
from worker.providers.base import TextDelta

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterNodes]:
    with RedisClusterNodes(3) as nodes:
        yield nodes


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture(scope="module")
def env(
    cluster: RedisClusterNodes, broker: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    effects = tmp_path_factory.mktemp("effects") / "effects.log"
    return {
        "SIGNOFF_REDIS_URL": cluster.url,
        "SIGNOFF_REDIS_CLUSTER": "true",
        "SIGNOFF_BROKER_URL": broker.url,
        "SIGNOFF_KEY_PREFIX": f"cl{uuid.uuid4().hex[:6]}",
        "SIGNOFF_FLUSH_INTERVAL_MS": "10",
        "SIGNOFF_TOOLS_MODULE": "tests.effect_tools",
        "SIGNOFF_TEST_EFFECTS": str(effects),
    }


@pytest.fixture(scope="module")
def worker(env: dict[str, str]) -> Iterator[WorkerProcess]:
    process = WorkerProcess(env, concurrency=8, name="cluster").start()
    yield process
    process.stop()


@pytest.fixture
def client(env: dict[str, str], worker: WorkerProcess) -> Iterator[Client]:
    settings = Settings(
        redis_url=env["SIGNOFF_REDIS_URL"],
        redis_cluster=True,
        broker_url=env["SIGNOFF_BROKER_URL"],
        key_prefix=env["SIGNOFF_KEY_PREFIX"],
    )
    with Client(settings) as signoff:
        yield signoff


def node_of(cluster: RedisClusterNodes, key: str) -> int:
    slot = key_slot(key.encode())
    return next(i for i in range(3) if cluster.slot_range(i)[0] <= slot <= cluster.slot_range(i)[1])


def test_turns_run_and_their_keys_spread_over_the_nodes(
    client: Client, cluster: RedisClusterNodes
) -> None:
    conversations = [client.new_conversation() for _ in range(24)]
    turns = [(c, c.send(f"hello {n}")) for n, c in enumerate(conversations)]
    for n, (conversation, turn) in enumerate(turns):
        assert f'"hello {n}"' in conversation.wait_for_turn(turn, timeout=60).text
    keys = client.keys
    nodes = {node_of(cluster, keys.conversation(c.conversation_id)) for c in conversations}
    assert nodes == {0, 1, 2}
    for conversation in conversations[:3]:  # its keys all live on its shard's node
        cid = conversation.conversation_id
        node = redis.Redis(port=cluster.ports[node_of(cluster, keys.conversation(cid))])
        found = node.keys(keys.conversation_prefix(cid) + "*")
        assert {k.decode().rsplit(":", 1)[-1] for k in found} >= {"conv", "events", "steps"}
        node.close()
    listed = client.store.ids(limit=100)
    ids = [c.conversation_id for c in conversations]
    assert [c for c in listed if c in ids] == ids[::-1]  # merged from the shards, newest first


def test_an_approval_parks_resolves_and_runs_its_tool_once(
    client: Client, env: dict[str, str]
) -> None:
    receiver = client.notification_stream(group="cluster-test", min_idle_ms=60_000)
    conversation = client.new_conversation(tools={"record_effect": "ask"})
    turn = conversation.send(effect_prompt("on-a-cluster"))
    [note] = parked(conversation, timeout_s=30)
    deadline = time.monotonic() + 20
    delivery = None
    while time.monotonic() < deadline and delivery is None:
        found = receiver.recv(timeout_s=1)
        if found is not None and found.notification_id == note.id:
            delivery = found
    assert delivery is not None and delivery.kind is NotificationKind.INTERACTION
    receiver.resolve(delivery, Allow(), actor="carol")
    response = conversation.wait_for_turn(turn, timeout=60)
    assert "record_effect" in response.text
    assert Path(env["SIGNOFF_TEST_EFFECTS"]).read_text().count(" on-a-cluster\n") == 1


def test_the_operators_policy_reaches_every_shard(client: Client) -> None:
    policy = PolicyStore(client.redis, client.keys)
    policy.set(PolicyRule(tool="record_effect", policy=ToolPolicy.DENY), actor="ops")
    try:
        copies = client.keys.every_shard(client.keys.policy_rules_copy)
        assert len({key_slot(k.encode()) for k in copies}) == client.keys.shards
        assert all(client.redis.hget(k, "record_effect|*") == "deny" for k in copies)
        conversation = client.new_conversation(tools={"record_effect": "auto"})
        response = conversation.chat_to_completion(effect_prompt("denied-on-a-cluster"))
        assert "denied" in response.text.lower()
    finally:
        policy.remove("record_effect", actor="ops")
    assert not any(client.redis.hexists(k, "record_effect|*") for k in copies)


def test_an_owners_daily_budget_holds_across_slots(client: Client) -> None:
    owner = f"owner{uuid.uuid4().hex[:6]}"
    budgets = client.stores.budgets
    budgets.set(BudgetKind.OWNER, owner, BudgetSpec(tokens=400))
    conversation = client.new_conversation(owner=owner, model_settings={"max_output_tokens": 300})
    with pytest.raises(TurnFailed, match=f"budget_exhausted: the owner budget of owner '{owner}'"):
        for n in range(10):  # each call's worst case is 300 and more: few fit
            conversation.chat_to_completion(f"call {n}")
    today = budgets.get(BudgetKind.OWNER, owner)
    assert today.spent_tokens > 0 and today.reserved_tokens == 0  # settled apart, given back
    record = client.redis.hgetall(client.keys.conversation(conversation.conversation_id))
    assert int(record.get("reserved:tokens", 0)) == 0
    assert int(record.get("spent:tokens", 0)) == today.spent_tokens


def _today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


def test_shards_are_fixed_by_the_settings() -> None:
    keys = KeySpace.of(
        Settings(redis_cluster=True, broker_url="redis://127.0.0.1:1/0", key_prefix="x")
    )
    assert keys.shards == 12
    with pytest.raises(ValueError, match="SIGNOFF_BROKER_URL"):
        Settings(redis_cluster=True, broker_url="", key_prefix="x")


def test_the_web_serves_from_a_cluster(env: dict[str, str], worker: WorkerProcess) -> None:
    app = create_app(
        Settings(
            redis_url=env["SIGNOFF_REDIS_URL"],
            redis_cluster=True,
            broker_url=env["SIGNOFF_BROKER_URL"],
            key_prefix=env["SIGNOFF_KEY_PREFIX"],
            secret_key="cluster-test-secret-key-0123456789",
        )
    )
    svc: Services = app.extensions["signoff"]
    try:
        http = app.test_client()
        headers = {"Authorization": f"Bearer {svc.tokens.create('cl', Role.OPERATOR)}"}
        made = http.post("/api/v1/conversations", json={}, headers=headers)
        assert made.status_code == 201, made.json
        cid = made.json["id"]
        sent = http.post(
            f"/api/v1/conversations/{cid}/prompts", json={"text": "from the web"}, headers=headers
        )
        assert sent.status_code == 202, sent.json
        path = f"/api/v1/conversations/{cid}/turns/{sent.json['turn_id']}"
        deadline = time.monotonic() + 30
        while http.get(path, headers=headers).json["status"] != "completed":
            assert time.monotonic() < deadline, http.get(path, headers=headers).json
            time.sleep(0.1)
        live = SseReader(
            http.get(f"/api/v1/conversations/{cid}/events", headers=headers, buffered=False)
        )
        again = http.post(
            f"/api/v1/conversations/{cid}/prompts", json={"text": "live now"}, headers=headers
        )
        assert again.status_code == 202, again.json
        deadline = time.monotonic() + 30
        ended: dict[str, Any] = {}
        while ended.get("turn_id") != again.json["turn_id"]:  # through the live fan-out
            assert time.monotonic() < deadline
            [event] = live.events(1, timeout=30)
            ended = event["data"] if event["data"]["kind"] == "completed" else {}
        live.close()
        listed = http.get("/api/v1/conversations?limit=200", headers=headers).json
        assert cid in [c["id"] for c in listed["items"]] and listed["total"] >= 1
        page = http.get(f"/conversations/{cid}", headers=headers)
        assert page.status_code == 200 and b"from the web" in page.data
    finally:
        svc.close()


def test_doctor_reads_every_primary(env: dict[str, str], worker: WorkerProcess) -> None:
    result = run_cli(env, "doctor")
    lines = {line.split()[1].rstrip(":"): line for line in result.stdout.splitlines()}
    assert "a Redis Cluster of 3 primaries, version 7" in lines["redis"], result.stdout
    assert lines["broker"].startswith("ok    broker: a Redis of its own"), result.stdout
    unreachable = {**env, "SIGNOFF_REDIS_URL": "redis://:secret@127.0.0.1:1/0"}
    refused = run_cli(unreachable, "doctor")
    assert refused.returncode == 1
    assert refused.stdout.startswith("FAIL  redis: cannot reach redis://:***@127.0.0.1:1/0")
    assert "secret" not in refused.stdout + refused.stderr


def test_a_lost_node_answers_503_and_the_web_serves_again_once_it_is_back(
    broker: EmbeddedRedis,
) -> None:
    """A primary without a replica crashes: its shards' reads answer 503 (and, once the
    cluster calls itself down, every read does), never a server error; when the node is back
    the same web process serves again, without a restart."""
    with RedisClusterNodes(3) as nodes:
        settings = Settings(
            redis_url=nodes.url,
            redis_cluster=True,
            broker_url=broker.url,
            key_prefix=f"lost{uuid.uuid4().hex[:6]}",
            secret_key="cluster-test-secret-key-0123456789",
            redis_timeout_s=1.0,
        )
        app = create_app(settings)
        svc: Services = app.extensions["signoff"]
        try:
            http = app.test_client()
            headers = {"Authorization": f"Bearer {svc.tokens.create('cl', Role.OPERATOR)}"}
            made = [http.post("/api/v1/conversations", json={}, headers=headers) for _ in range(12)]
            cids = [m.json["id"] for m in made]
            on_node = {cid: node_of(nodes, svc.keys.conversation(cid)) for cid in cids}
            assert set(on_node.values()) == {0, 1, 2}
            # a node other than the API tokens' (without it nobody signs in)
            lost = next(n for n in range(3) if n != node_of(nodes, svc.keys.tokens()))
            nodes.kill_node(lost)
            answered: set[int] = set()
            deadline = time.monotonic() + 6  # past the node timeout (2 s): the cluster goes down
            while time.monotonic() < deadline:
                for cid, node in on_node.items():
                    read = http.get(f"/api/v1/conversations/{cid}", headers=headers)
                    answered.add(read.status_code)
                    if read.status_code == 200:
                        assert node != lost and read.json["id"] == cid
                    else:
                        assert read.status_code == 503, read.json
                        assert read.json["error"]["code"] == "storage_error"
                listed = http.get("/api/v1/conversations", headers=headers)  # every shard
                assert listed.status_code == 503 and listed.json["error"]["code"] == "storage_error"
            assert 503 in answered
            nodes.restart_node(lost)
            deadline = time.monotonic() + 20
            while True:
                reads = {
                    cid: http.get(f"/api/v1/conversations/{cid}", headers=headers)
                    for cid in on_node
                }
                codes = {cid: read.status_code for cid, read in reads.items()}
                # the node came back without its data (test nodes keep nothing on disk)
                if codes == {cid: 404 if on_node[cid] == lost else 200 for cid in on_node}:
                    break
                assert set(codes.values()) <= {200, 404, 503}, codes
                assert time.monotonic() < deadline, codes
                time.sleep(0.2)
            assert http.get("/api/v1/conversations", headers=headers).status_code == 200
        finally:
            svc.close()


def test_turns_in_flight_finish_after_the_cluster_was_down(
    broker: EmbeddedRedis, tmp_path: Path
) -> None:
    """A primary crashes while turns stream and comes back seconds later (empty: test nodes
    keep nothing on disk). The worker takes the cluster's refusals as a cut connection and
    sends its legs again (after a lease, 30 s, where a release was not answered), with
    `signoff beat` beside it as deployed: every turn on the nodes that stayed finishes, once,
    and the worker is still there."""
    with RedisClusterNodes(3) as nodes:
        env = {
            "SIGNOFF_REDIS_URL": nodes.url,
            "SIGNOFF_REDIS_CLUSTER": "true",
            "SIGNOFF_BROKER_URL": broker.url,
            "SIGNOFF_KEY_PREFIX": f"down{uuid.uuid4().hex[:6]}",
            "SIGNOFF_FLUSH_INTERVAL_MS": "10",
            "SIGNOFF_SCRIPTED_TOKEN_DELAY_MS": "40",  # a turn streams for about a second
        }
        worker = WorkerProcess(env, concurrency=16, name="cluster-down").start()
        beat = BeatProcess(env).start()
        try:
            settings = Settings(
                redis_url=nodes.url,
                redis_cluster=True,
                broker_url=broker.url,
                key_prefix=env["SIGNOFF_KEY_PREFIX"],
            )
            with Client(settings) as client:
                conversations = [client.new_conversation() for _ in range(12)]
                on_node = {
                    c: node_of(nodes, client.keys.conversation(c.conversation_id))
                    for c in conversations
                }
                assert set(on_node.values()) == {0, 1, 2}
                turns = [(c, c.send(f"the outage {n}")) for n, c in enumerate(conversations)]
                time.sleep(0.5)  # the turns are streaming
                lost = 2
                nodes.kill_node(lost)
                time.sleep(4)  # past the node timeout: the cluster refuses every command
                nodes.restart_node(lost)
                for n, (conversation, turn) in enumerate(turns):
                    if on_node[conversation] == lost:
                        continue
                    try:
                        response = conversation.wait_for_turn(turn, timeout=150)
                    except TimeoutError as exc:
                        tail = worker.log()[-6000:]
                        raise AssertionError(f"{exc}; the worker's log:\n{tail}") from exc
                    assert f'"the outage {n}"' in response.text
                    steps = conversation.history
                    assert [s.type for s in steps].count(StepType.USER_INPUT) == 1
                    answers = [s for s in steps if s.type is StepType.TEXT_RESPONSE]
                    assert [s.status for s in answers].count(StepStatus.DONE) == 1
            assert worker.process is not None and worker.process.poll() is None
            # no leg failed on the outage: each one cut off, even at its lease's release, was
            # sent again (once the lease lapses)
            assert "raised unexpected" not in worker.log(), worker.log()[-3000:]
        finally:
            beat.stop()
            worker.stop()


def test_a_lost_node_fails_only_the_delta_ticks_of_its_own_shards(broker: EmbeddedRedis) -> None:
    """A primary crashes while conversations stream: one tick still writes the deltas of
    the shards on the nodes that answer, and only the legs of the lost node's see the error
    (redis-py's cluster pipeline fails whole when one node does not answer)."""
    with RedisClusterNodes(3) as nodes:
        client = nodes.client()
        keys = KeySpace(prefix=f"tick{uuid.uuid4().hex[:6]}", shards=3)
        settings = Settings(
            redis_url=nodes.url, redis_cluster=True, broker_url=broker.url, key_prefix=keys.prefix
        )
        flusher = DeltaFlusher(client, keys, settings)
        cids = [f"c{n}" for n in range(12)]
        streamers = [streamer_for(client, keys, settings, flusher, cid) for cid in cids]
        on_node = {cid: node_of(nodes, keys.conversation(cid)) for cid in cids}
        assert set(on_node.values()) == {0, 1, 2}
        lost = on_node[cids[0]]
        nodes.kill_node(lost)
        for streamer in streamers:
            streamer._buffer(TextDelta(text=f"hello {streamer.cid}"))
        flusher.tick(streamers)
        for streamer in streamers:
            if on_node[streamer.cid] == lost:
                with pytest.raises(StorageError, match="streamed deltas"):
                    streamer.run(iter([]))
            else:
                assert deltas_in_stream(client, keys, streamer.cid) == [f"hello {streamer.cid}"]
                assert streamer.run(iter([])).content == f"hello {streamer.cid}"
        client.close()
