"""Server-Sent Events: Last-Event-ID replay, live fan-out; no gaps, duplicates or leaks."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from redis.cluster import RedisCluster
from werkzeug.test import TestResponse

from shared.errors import StorageError
from shared.models.events import StatusEvent, StepEvent, TurnStartedEvent
from shared.models.steps import Step, StepSource, StepStatus, StepTarget, StepType
from tests.web.conftest import emit
from webui.services import Services
from webui.stream_ids import parse_stream_id


class SseReader:
    """Reads frames from a streaming test response, with a deadline on each wait."""

    def __init__(self, response: TestResponse) -> None:
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.mimetype == "text/event-stream"
        self.response = response
        self._chunks: Iterator[bytes] = iter(response.response)
        self._buffer = ""
        self.comments: list[str] = []
        self.ended = False

    def _frame(self, deadline: float) -> dict[str, str] | None:
        while "\n\n" not in self._buffer:
            if time.monotonic() > deadline:
                raise AssertionError(f"no frame in time; buffer: {self._buffer!r}")
            try:
                chunk = next(self._chunks)
            except StopIteration:
                self.ended = True
                return None
            self._buffer += chunk.decode() if isinstance(chunk, bytes) else chunk
        raw, self._buffer = self._buffer.split("\n\n", 1)
        fields: dict[str, str] = {}
        for line in raw.split("\n"):
            name, _, value = line.partition(": ")
            fields[name] = value
        return fields

    def events(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """The next `count` event frames (comments and retry lines are collected aside)."""
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while len(found) < count:
            frame = self._frame(deadline)
            if frame is None:
                break
            if "id" in frame:
                found.append(
                    {"id": frame["id"], "event": frame["event"], "data": json.loads(frame["data"])}
                )
            elif "" in frame:
                self.comments.append(frame[""])
        return found

    def quiet_for(self, heartbeats: int = 2) -> list[dict[str, Any]]:
        """Event frames that arrive before `heartbeats` more heartbeat comments."""
        seen = len([c for c in self.comments if c == "heartbeat"])
        found: list[dict[str, Any]] = []
        deadline = time.monotonic() + 5
        while len([c for c in self.comments if c == "heartbeat"]) < seen + heartbeats:
            frame = self._frame(deadline)
            if frame is None:
                break
            if "id" in frame:
                found.append(frame)
            elif "" in frame:
                self.comments.append(frame[""])
        return found

    def close(self) -> None:
        self.response.close()


def _step(cid: str, text: str, index: int = 1) -> StepEvent:
    step = Step(
        step_index=index,
        type=StepType.TEXT_RESPONSE,
        source=StepSource.MODEL,
        target=StepTarget.USER,
        status=StepStatus.ACTIVE,
        content_delta=text,
    )
    return StepEvent(conversation_id=cid, turn_id="t1", step_index=index, step=step)


def _open(http: FlaskClient, path: str, headers: dict[str, str]) -> SseReader:
    return SseReader(http.get(path, headers=headers, buffered=False))


def test_replay_after_last_event_id_then_live_once(
    http: FlaskClient, viewer: dict[str, str], svc: Services
) -> None:
    cid = svc.client.new_conversation().conversation_id
    ids = [emit(svc, _step(cid, f"part {i} ")) for i in range(5)]
    reader = _open(http, f"/api/v1/conversations/{cid}/events", {**viewer, "Last-Event-ID": ids[1]})
    replayed = reader.events(3)
    assert [e["id"] for e in replayed] == ids[2:]
    assert [e["data"]["step"]["content_delta"] for e in replayed] == [
        "part 2 ",
        "part 3 ",
        "part 4 ",
    ]
    assert {e["event"] for e in replayed} == {"step"}
    assert replayed[0]["data"]["id"] == ids[2] and replayed[0]["data"]["conversation_id"] == cid
    live_id = emit(svc, StatusEvent(conversation_id=cid, status="running"))
    (live,) = reader.events(1)
    assert live["id"] == live_id and live["event"] == "status"
    assert live["data"]["status"] == "running"
    assert reader.quiet_for() == []  # nothing twice
    reader.close()
    assert svc.broadcaster.subscriber_count == 0


def test_query_parameter_and_header_precedence(
    http: FlaskClient, viewer: dict[str, str], svc: Services
) -> None:
    cid = svc.client.new_conversation().conversation_id
    ids = [emit(svc, _step(cid, str(i))) for i in range(3)]
    by_query = _open(http, f"/api/v1/conversations/{cid}/events?last_event_id={ids[0]}", viewer)
    assert [e["id"] for e in by_query.events(2)] == ids[1:]
    by_query.close()
    both = _open(
        http,
        f"/api/v1/conversations/{cid}/events?last_event_id={ids[0]}",
        {**viewer, "Last-Event-ID": ids[1]},
    )
    assert [e["id"] for e in both.events(1)] == ids[2:]
    assert both.quiet_for() == []
    both.close()
    from_start = _open(http, f"/api/v1/conversations/{cid}/events?last_event_id=0", viewer)
    assert [e["id"] for e in from_start.events(3)] == ids
    from_start.close()


def test_without_last_event_id_only_live_events_arrive(
    http: FlaskClient, viewer: dict[str, str], svc: Services
) -> None:
    cid = svc.client.new_conversation().conversation_id
    emit(svc, _step(cid, "old"))
    other = svc.client.new_conversation().conversation_id
    reader = _open(http, f"/api/v1/conversations/{cid}/events", viewer)
    emit(svc, _step(other, "someone else's"))
    new_id = emit(svc, _step(cid, "new"))
    (event,) = reader.events(1)
    assert event["id"] == new_id and event["data"]["step"]["content_delta"] == "new"
    assert "heartbeat" in reader.comments or reader.quiet_for(1) == []
    reader.close()


def test_events_written_during_replay_arrive_once_in_order(
    http: FlaskClient, viewer: dict[str, str], svc: Services
) -> None:
    cid = svc.client.new_conversation().conversation_id
    written = [emit(svc, _step(cid, str(i))) for i in range(600)]  # more than one replay page
    done = threading.Event()

    def keep_writing() -> None:
        for i in range(300):
            written.append(emit(svc, _step(cid, f"late {i}")))
        done.set()

    writer = threading.Thread(target=keep_writing)
    reader = _open(http, f"/api/v1/conversations/{cid}/events", {**viewer, "Last-Event-ID": "0-0"})
    writer.start()
    received = reader.events(900, timeout=20)
    writer.join()
    assert done.is_set()
    assert [e["id"] for e in received] == written
    assert reader.quiet_for() == []
    reader.close()


def test_global_feed_carries_every_conversation(
    http: FlaskClient, viewer: dict[str, str], svc: Services
) -> None:
    first = svc.client.new_conversation().conversation_id
    second = svc.client.new_conversation().conversation_id
    # Ids of different streams do not order each other: make the first stream's run ahead.
    svc.redis.xadd(svc.keys.events(first), {"e": "{}"}, id="9999999999999-0")
    reader = _open(http, "/api/v1/events", {**viewer, "Last-Event-ID": "1-0"})
    a = emit(svc, TurnStartedEvent(conversation_id=first, turn_id="t1"))
    b = emit(svc, _step(second, "hello"))
    events = reader.events(2)
    assert a.startswith("9999999999999-") and parse_stream_id(b) < parse_stream_id(a)
    assert [(e["id"], e["data"]["conversation_id"]) for e in events] == [(a, first), (b, second)]
    assert [e["event"] for e in events] == ["turn_started", "step"]
    reader.close()
    assert svc.broadcaster.subscriber_count == 0


def test_slow_client_is_disconnected(
    http: FlaskClient, viewer: dict[str, str], svc: Services
) -> None:
    cid = svc.client.new_conversation().conversation_id
    svc.broadcaster.queue_size = 3
    reader = _open(http, f"/api/v1/conversations/{cid}/events", viewer)
    ids = [emit(svc, _step(cid, str(i))) for i in range(10)]
    deadline = time.monotonic() + 5
    while svc.broadcaster.subscriber_count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert svc.broadcaster.subscriber_count == 0
    delivered = reader.events(10)
    assert reader.ended  # the stream ended instead of skipping events
    assert [e["id"] for e in delivered] == ids[: len(delivered)] and len(delivered) <= 3
    assert any("too slow" in c for c in reader.comments)
    # it resumes where it stopped, with nothing lost
    resumed = _open(
        http,
        f"/api/v1/conversations/{cid}/events",
        {**viewer, "Last-Event-ID": delivered[-1]["id"] if delivered else "0-0"},
    )
    assert [e["id"] for e in resumed.events(10 - len(delivered))] == ids[len(delivered) :]
    resumed.close()


def test_client_that_never_reads_is_unregistered(
    http: FlaskClient, viewer: dict[str, str], svc: Services
) -> None:
    cid = svc.client.new_conversation().conversation_id
    response = http.get(f"/api/v1/conversations/{cid}/events", headers=viewer, buffered=False)
    assert svc.broadcaster.subscriber_count == 1
    response.close()  # the server closes the response of a client that went away
    assert svc.broadcaster.subscriber_count == 0


def test_bad_last_event_id_is_400(http: FlaskClient, viewer: dict[str, str], svc: Services) -> None:
    cid = svc.client.new_conversation().conversation_id
    response = http.get(
        f"/api/v1/conversations/{cid}/events", headers={**viewer, "Last-Event-ID": "yesterday"}
    )
    assert response.status_code == 400
    assert response.json["error"]["code"] == "bad_parameter"
    assert svc.broadcaster.subscriber_count == 0


def test_lost_pubsub_connection_ends_clients_so_they_resume(
    http: FlaskClient, viewer: dict[str, str], svc: Services
) -> None:
    cid = svc.client.new_conversation().conversation_id
    reader = _open(http, f"/api/v1/conversations/{cid}/events", viewer)
    first = emit(svc, _step(cid, "before"))
    assert [e["id"] for e in reader.events(1)] == [first]
    if isinstance(svc.redis, RedisCluster):  # the subscription is on one node of them all
        svc.redis.client_kill_filter(_type="pubsub", target_nodes=RedisCluster.ALL_NODES)
    else:
        svc.redis.client_kill_filter(_type="pubsub")
    missed = emit(svc, _step(cid, "while reconnecting"))
    reader.events(5, timeout=10)  # returns early once the server ends the stream
    assert reader.ended and any("reconnect" in c for c in reader.comments)
    resumed = _open(http, f"/api/v1/conversations/{cid}/events", {**viewer, "Last-Event-ID": first})
    assert [e["id"] for e in resumed.events(1)] == [missed]
    live = emit(svc, _step(cid, "after"))
    assert [e["id"] for e in resumed.events(1)] == [live]
    resumed.close()


def test_storage_failure_mid_stream_ends_it(
    http: FlaskClient, viewer: dict[str, str], svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid = svc.client.new_conversation().conversation_id

    def broken(*args: object, **kwargs: object) -> list[object]:
        raise StorageError("reading events: ConnectionError")

    monkeypatch.setattr(svc.events, "after", broken)
    reader = _open(http, f"/api/v1/conversations/{cid}/events", {**viewer, "Last-Event-ID": "0"})
    assert reader.events(1) == [] and reader.ended
    assert any("storage unavailable" in c for c in reader.comments)
    assert svc.broadcaster.subscriber_count == 0
