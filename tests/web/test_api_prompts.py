"""Prompts (JSON, Content, multipart), their limits, turns and history."""

from __future__ import annotations

import base64
import io

import pytest
from flask.testing import FlaskClient

from shared.models.content import Content
from shared.models.events import ChatResponse
from shared.models.model_settings import ModelSettings
from shared.models.steps import Step, StepSource, StepType, UsageMetadata
from shared.store.history import HistoryStore
from tests.web.conftest import AppFactory, bearer, new_conversation, services_of
from webui.services import Services


def _send(http: FlaskClient, cid: str, headers: dict[str, str], **kwargs: object) -> object:
    return http.post(f"/api/v1/conversations/{cid}/prompts", headers=headers, **kwargs)


def _queued_prompt(svc: Services, cid: str, turn_id: str) -> Content:
    return svc.store.turn(cid, turn_id).prompt


def test_text_prompt_is_queued(http: FlaskClient, submitter: dict[str, str], svc: Services) -> None:
    cid = new_conversation(http, submitter)
    response = http.post(
        f"/api/v1/conversations/{cid}/prompts",
        json={"text": "hello\x07 there"},
        headers=submitter,
    )
    assert response.status_code == 202
    turn_id = response.json["turn_id"]
    assert response.json == {"conversation_id": cid, "turn_id": turn_id, "status": "queued"}
    assert response.headers["Location"].endswith(f"/conversations/{cid}/turns/{turn_id}")
    assert _queued_prompt(svc, cid, turn_id).text == "hello there"  # control character stripped
    turn = http.get(f"/api/v1/conversations/{cid}/turns/{turn_id}", headers=submitter).json
    assert turn["status"] == "queued" and turn["response"] is None
    assert turn["prompt"]["parts"] == [{"kind": "text", "text": "hello there"}]


def test_slash_command_text(http: FlaskClient, submitter: dict[str, str], svc: Services) -> None:
    cid = new_conversation(http, submitter)
    turn_id = http.post(
        f"/api/v1/conversations/{cid}/prompts", json={"text": "/compact now"}, headers=submitter
    ).json["turn_id"]
    command = _queued_prompt(svc, cid, turn_id).slash_command
    assert command is not None and (command.name, command.args) == ("compact", "now")


def test_content_prompt_with_media(
    http: FlaskClient, submitter: dict[str, str], svc: Services
) -> None:
    cid = new_conversation(http, submitter)
    png = b"\x89PNG fake image bytes"
    content = {
        "parts": [
            {"kind": "text", "text": "what is this?"},
            {"kind": "media", "mime_type": "image/png", "data": base64.b64encode(png).decode()},
        ]
    }
    response = http.post(
        f"/api/v1/conversations/{cid}/prompts", json={"content": content}, headers=submitter
    )
    assert response.status_code == 202, response.text
    prompt = _queued_prompt(svc, cid, response.json["turn_id"])
    assert prompt.text == "what is this?"
    assert [(m.mime_type, m.data) for m in prompt.media] == [("image/png", png)]


def test_multipart_prompt(http: FlaskClient, submitter: dict[str, str], svc: Services) -> None:
    cid = new_conversation(http, submitter)
    response = http.post(
        f"/api/v1/conversations/{cid}/prompts",
        data={
            "text": "two files",
            "media": [
                (io.BytesIO(b"GIF89a..."), "a.gif", "image/gif"),
                (io.BytesIO(b"plain words"), "notes.txt", "text/plain"),
            ],
        },
        content_type="multipart/form-data",
        headers=submitter,
    )
    assert response.status_code == 202, response.text
    prompt = _queued_prompt(svc, cid, response.json["turn_id"])
    assert prompt.text == "two files"
    assert [(m.mime_type, m.data, m.description) for m in prompt.media] == [
        ("image/gif", b"GIF89a...", "a.gif"),
        ("text/plain", b"plain words", "notes.txt"),
    ]


def test_multipart_media_type_not_allowed_is_422(
    http: FlaskClient, submitter: dict[str, str]
) -> None:
    cid = new_conversation(http, submitter)
    response = http.post(
        f"/api/v1/conversations/{cid}/prompts",
        data={"media": [(io.BytesIO(b"MZ..."), "x.exe", "application/x-msdownload")]},
        content_type="multipart/form-data",
        headers=submitter,
    )
    assert response.status_code == 422
    assert response.json["error"]["code"] == "prompt_rejected"
    assert "application/x-msdownload" in response.json["error"]["message"]


def test_multipart_media_that_is_no_file_is_422(
    http: FlaskClient, submitter: dict[str, str], svc: Services
) -> None:
    """The document declares media as files: a plain form field is not one (found by fuzzing)."""
    cid = new_conversation(http, submitter)
    response = http.post(
        f"/api/v1/conversations/{cid}/prompts",
        data={"text": "hi", "media": "{}"},
        content_type="multipart/form-data",
        headers=submitter,
    )
    assert response.status_code == 422, response.text
    assert response.json["error"]["message"].startswith("media:")
    assert svc.store.get(cid).queued == 0


def test_empty_prompt_is_422(http: FlaskClient, submitter: dict[str, str], svc: Services) -> None:
    cid = new_conversation(http, submitter)
    for body in ({"text": "  \x00\n "}, {"content": {"parts": []}}):
        response = http.post(f"/api/v1/conversations/{cid}/prompts", json=body, headers=submitter)
        assert response.status_code == 422
        assert response.json["error"]["code"] == "prompt_rejected"
        assert "empty" in response.json["error"]["message"]
    assert svc.store.get(cid).queued == 0  # an invalid prompt queues nothing


def test_prompt_body_shape_is_422(http: FlaskClient, submitter: dict[str, str]) -> None:
    cid = new_conversation(http, submitter)
    both = {"text": "a", "content": {"parts": [{"kind": "text", "text": "b"}]}}
    for body in ({}, both, {"text": 5}):
        response = http.post(f"/api/v1/conversations/{cid}/prompts", json=body, headers=submitter)
        assert response.status_code == 422, body
        assert response.json["error"]["code"] == "invalid_input"
        assert response.json["error"]["details"]


def test_oversize_prompt_is_413(make_app: AppFactory) -> None:
    app = make_app(max_prompt_text_bytes=1000, max_prompt_media_bytes=1000)
    http = app.test_client()
    headers = bearer(services_of(app).tokens.create("t", "submitter"))
    cid = new_conversation(http, headers)
    over_setting = http.post(
        f"/api/v1/conversations/{cid}/prompts", json={"text": "x" * 1001}, headers=headers
    )
    assert over_setting.status_code == 413
    assert over_setting.json["error"]["code"] == "payload_too_large"
    assert "limit is 1000 bytes" in over_setting.json["error"]["message"]
    over_body = http.post(
        f"/api/v1/conversations/{cid}/prompts", json={"text": "x" * 200_000}, headers=headers
    )
    assert over_body.status_code == 413  # refused by Flask before it is read
    assert over_body.json["error"]["code"] == "payload_too_large"
    assert services_of(app).store.get(cid).queued == 0


def test_turn_of_completed_turn_carries_response(
    http: FlaskClient, viewer: dict[str, str], svc: Services, submitter: dict[str, str]
) -> None:
    cid = new_conversation(http, submitter)
    turn_id = http.post(
        f"/api/v1/conversations/{cid}/prompts", json={"text": "hi"}, headers=submitter
    ).json["turn_id"]
    response = ChatResponse(turn_id=turn_id, text="done", usage_metadata=UsageMetadata())
    svc.redis.hset(
        svc.keys.turn(cid, turn_id),
        mapping={
            "status": "completed",
            "finished_at": 12.5,
            "response": response.model_dump_json(),
        },
    )
    turn = http.get(f"/api/v1/conversations/{cid}/turns/{turn_id}", headers=viewer).json
    assert turn["status"] == "completed" and turn["finished_at"] == 12.5
    assert turn["response"]["text"] == "done" and turn["error"] is None
    missing = http.get(f"/api/v1/conversations/{cid}/turns/nope", headers=viewer)
    assert missing.status_code == 404


def _steps(n: int) -> list[Step]:
    return [
        Step(
            id=f"s{i}",
            step_index=i,
            type=StepType.USER_INPUT if i % 2 == 0 else StepType.TEXT_RESPONSE,
            source=StepSource.USER if i % 2 == 0 else StepSource.MODEL,
            content=f"step {i}",
        )
        for i in range(n)
    ]


def test_history_pages_over_retained_steps(
    http: FlaskClient, submitter: dict[str, str], viewer: dict[str, str], svc: Services
) -> None:
    cid = new_conversation(http, submitter, max_history_size=6)
    history = HistoryStore(svc.redis, svc.keys, cid, max_history_size=6)
    steps = _steps(10)
    for i in range(0, 10, 2):
        history.append(steps[i], start_turn=True, usage=UsageMetadata.from_counts(3, 4))
        history.append(steps[i + 1])
    page = http.get(f"/api/v1/conversations/{cid}/history?offset=1&limit=3", headers=viewer).json
    assert page["total"] == 6 and page["trimmed"] == 4
    assert [s["content"] for s in page["steps"]] == ["step 5", "step 6", "step 7"]
    assert page["turn_start_indices"] == [0, 2, 4]  # relative to the retained steps
    assert page["compaction_indices"] == []
    assert page["offset"] == 1 and page["limit"] == 3
    detail = http.get(f"/api/v1/conversations/{cid}", headers=viewer).json
    assert detail["turn_count"] == 3
    assert detail["usage"]["total"]["total_token_count"] == 35
    assert detail["usage"]["last_turn"]["total_token_count"] == 7
    bad = http.get(f"/api/v1/conversations/{cid}/history?limit=5000", headers=viewer)
    assert bad.status_code == 400


def test_prompt_options_are_stored_with_the_turn(
    http: FlaskClient, submitter: dict[str, str], svc: Services
) -> None:
    cid = new_conversation(http, submitter)
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = {
        "text": "hi",
        "tool_selection": "none",
        "timeout_s": 5,
        "response_schema": schema,
        "model_settings": {"max_output_tokens": 9, "stop": ["END"]},
    }
    response = _send(http, cid, submitter, json=body)
    assert response.status_code == 202, response.json
    options = svc.store.turn(cid, response.json["turn_id"]).options
    assert (options.tool_selection, options.timeout_s) == ("none", 5)
    assert options.response_schema == schema
    assert options.model_settings is not None
    assert options.model_settings.chosen() == ["max_output_tokens", "stop"]
    plain = _send(http, cid, submitter, json={"text": "again"}).json["turn_id"]
    assert svc.store.turn(cid, plain).options.is_empty()
    shown = http.get(
        f"/api/v1/conversations/{cid}/turns/{response.json['turn_id']}", headers=submitter
    )
    assert shown.json["options"] == {
        "tool_selection": "none",
        "timeout_s": 5.0,
        "response_schema": schema,
        "model_settings": ModelSettings(max_output_tokens=9, stop=["END"]).model_dump(mode="json"),
    }


def test_multipart_prompt_options(
    http: FlaskClient, submitter: dict[str, str], svc: Services
) -> None:
    cid = new_conversation(http, submitter)
    form = {"text": "hi", "tool_selection": "required", "timeout_s": "2.5"}
    response = _send(http, cid, submitter, data=form, content_type="multipart/form-data")
    assert response.status_code == 202, response.json
    options = svc.store.turn(cid, response.json["turn_id"]).options
    assert (options.tool_selection, options.timeout_s) == ("required", 2.5)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "hi", "timeout_s": 0}, "timeout_s"),
        ({"text": "hi", "timeout_s": "5"}, "timeout_s"),
        ({"text": "hi", "tool_selection": "always"}, "tool_selection"),
        ({"text": "hi", "response_schema": {"type": "nope"}}, "response_schema"),
        ({"text": "hi", "response_schema": {"pattern": "(a+)+$" * 300}}, "response_schema"),
    ],
)
def test_bad_prompt_options_are_a_422_naming_the_option(
    http: FlaskClient, submitter: dict[str, str], svc: Services, body: dict[str, object], field: str
) -> None:
    cid = new_conversation(http, submitter)
    response = _send(http, cid, submitter, json=body)
    assert response.status_code == 422 and field in response.get_data(as_text=True)
    assert svc.store.get(cid).queued == 0


def test_bad_multipart_timeout_is_a_422(http: FlaskClient, submitter: dict[str, str]) -> None:
    cid = new_conversation(http, submitter)
    form = {"text": "hi", "timeout_s": "soon"}
    response = _send(http, cid, submitter, data=form, content_type="multipart/form-data")
    assert response.status_code == 422 and "timeout_s" in response.get_data(as_text=True)


def test_an_idempotency_key_makes_a_retried_prompt_queue_once(
    http: FlaskClient, submitter: dict[str, str], svc: Services
) -> None:
    cid = new_conversation(http, submitter)
    keyed = {**submitter, "Idempotency-Key": "order-42.try"}
    first = _send(http, cid, keyed, json={"text": "ship order 42"})
    assert first.status_code == 202 and "Idempotent-Replayed" not in first.headers
    assert first.json["turn_id"] == "order-42.try"
    again = _send(http, cid, keyed, json={"text": "ship order 42"})
    assert again.status_code == 202 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json == first.json and again.headers["Location"] == first.headers["Location"]
    assert svc.redis.lrange(svc.keys.inbox(cid), 0, -1) == ["order-42.try"]  # queued once

    other = _send(http, cid, keyed, json={"text": "ship order 43 instead"})
    assert other.status_code == 409, other.text
    assert "order-42.try" in other.json["error"]["message"]
    assert _queued_prompt(svc, cid, "order-42.try").text == "ship order 42"  # unchanged
    for bad in ("two words", "x" * 129, "a:{b}"):
        refused = _send(http, cid, {**submitter, "Idempotency-Key": bad}, json={"text": "hi"})
        assert refused.status_code == 422 and "Idempotency-Key" in refused.text, refused.text
    assert svc.redis.llen(svc.keys.inbox(cid)) == 1  # nothing else queued
