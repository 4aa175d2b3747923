"""Operator pages: untrusted output is escaped; lists, the live view and the usage chart render."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from flask.testing import FlaskClient

from shared.models.batches import BatchConfig, BatchStatus
from shared.models.steps import Step, StepSource, StepTarget, StepType, ToolCall, UsageMetadata
from shared.store.history import HistoryStore
from tests.web.conftest import page_csrf
from webui.services import Services

XSS = "<script>alert(1)</script>"


def test_model_output_is_escaped(signed_in: FlaskClient, svc: Services) -> None:
    cid = svc.client.new_conversation(metadata={"label": XSS}).conversation_id
    HistoryStore(svc.redis, svc.keys, cid).append(
        Step(id="u", step_index=0, type=StepType.USER_INPUT, source=StepSource.USER, content=XSS),
        Step(
            id="m",
            step_index=1,
            type=StepType.TEXT_RESPONSE,
            source=StepSource.MODEL,
            target=StepTarget.USER,
            content=f"answer {XSS}",
            thinking=f"thinking {XSS}",
        ),
        Step(
            id="c",
            step_index=2,
            type=StepType.TOOL_CALL,
            source=StepSource.MODEL,
            target=StepTarget.USER,
            tool_calls=[ToolCall(id="c1", name="calculator", args={"expression": XSS})],
        ),
        Step(
            id="r", step_index=3, type=StepType.TOOL_RESULT, source=StepSource.SYSTEM, content=XSS
        ),
        start_turn=True,
    )
    for path in (f"/conversations/{cid}", "/conversations"):
        html = signed_in.get(path).text
        assert XSS not in html
        assert "alert(1)" in html  # it is shown, as text
    page = signed_in.get(f"/conversations/{cid}").text
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 4
    assert '<details class="thinking"><summary>Thinking</summary>' in page
    assert "calculator" in page


def test_conversation_page(signed_in: FlaskClient, svc: Services) -> None:
    conversation = svc.client.new_conversation(system_prompt="Be kind.")
    cid = conversation.conversation_id
    page = signed_in.get(f"/conversations/{cid}")
    assert page.status_code == 200
    html = page.text
    assert f'data-events-url="/api/v1/conversations/{cid}/events"' in html
    assert 'data-last-event-id="0-0"' in html
    assert "demo model" in html  # the scripted model is labelled wherever it is shown
    assert 'id="abort-form"' in html and "Be kind." in html
    assert '<script src="/static/conversation.js"></script>' in html
    assert signed_in.get("/conversations/nope").status_code == 404


def test_page_forms_send_abort_and_close(signed_in: FlaskClient, svc: Services) -> None:
    cid = svc.client.new_conversation().conversation_id
    token = page_csrf(signed_in)
    sent = signed_in.post(f"/conversations/{cid}/prompts", data={"text": "hi", "csrf_token": token})
    assert sent.status_code == 302 and svc.store.get(cid).queued == 1
    empty = signed_in.post(
        f"/conversations/{cid}/prompts",
        data={"text": " ", "csrf_token": token},
        follow_redirects=True,
    )
    assert "prompt is empty" in empty.text  # shown as a message, nothing queued
    assert svc.store.get(cid).queued == 1
    signed_in.post(f"/conversations/{cid}/abort", data={"csrf_token": token})
    assert svc.store.get(cid).queued == 0
    signed_in.post(f"/conversations/{cid}/close", data={"csrf_token": token})
    closed = signed_in.get(f"/conversations/{cid}").text
    assert 'id="prompt-form"' not in closed and "status-closed" in closed


def test_conversation_list_pages(signed_in: FlaskClient, svc: Services) -> None:
    ids = [svc.client.new_conversation().conversation_id for _ in range(27)]
    first = signed_in.get("/conversations").text
    assert ids[-1] in first and ids[1] not in first
    assert "of 27" in first and "offset=25" in first
    second = signed_in.get("/conversations?offset=25").text
    assert ids[0] in second and ids[1] in second and ids[-1] not in second
    svc.client.conversation(ids[3]).close()
    closed = signed_in.get("/conversations?status=closed").text
    assert re.findall(r"/conversations/([0-9a-f]{20})\"", closed) == [ids[3]]
    assert signed_in.get("/conversations?status=bogus").status_code == 400


def test_usage_page_draws_a_chart(signed_in: FlaskClient, svc: Services) -> None:
    today = datetime.now(UTC).date().isoformat()
    svc.redis.hset(
        svc.keys.usage_by_day(today, 0),
        mapping={
            "signoff-demo:total_token_count": 1200,
            "signoff-demo:prompt_token_count": 1000,
            "llama3:8b:total_token_count": 300,
        },
    )
    html = signed_in.get("/usage").text
    assert '<svg id="usage-chart"' in html
    assert html.count('<rect class="bar"') == 2
    assert f"{today} llama3:8b: 300 tokens" in html
    totals = html[html.index('id="usage-totals"') :]
    assert "signoff-demo" in totals and "1200" in totals and "1000" in totals
    empty = signed_in.get("/usage?start=2001-01-01&end=2001-01-02").text
    assert "No usage recorded in this range." in empty and '<rect class="bar"' not in empty
    longer = signed_in.get("/usage?start=2001-01-01&end=2003-01-01")  # its last 366 days
    assert longer.status_code == 200 and "No usage recorded in this range." in longer.text
    assert signed_in.get("/usage?start=2001-13-01").status_code == 400


def test_history_page_links_to_earlier_steps(signed_in: FlaskClient, svc: Services) -> None:
    cid = svc.client.new_conversation().conversation_id
    steps = [
        Step(id=f"s{i}", step_index=i, type=StepType.USER_INPUT, content=f"prompt number {i}")
        for i in range(205)
    ]
    HistoryStore(svc.redis, svc.keys, cid).append(*steps, usage=UsageMetadata.from_counts(1, 1))
    latest = signed_in.get(f"/conversations/{cid}").text
    assert "prompt number 204" in latest and "prompt number 4<" not in latest
    assert f"/conversations/{cid}?offset=0" in latest
    earliest = signed_in.get(f"/conversations/{cid}?offset=0").text
    assert "prompt number 0<" in earliest and "prompt number 204" not in earliest


def test_page_forms_refuse_a_submitter_on_someone_elses_conversation(
    http: FlaskClient, svc: Services, submitter: dict[str, str]
) -> None:
    cid = svc.client.new_conversation(owner="someone-else").conversation_id
    for action in ("abort", "close", "prompts", "fork"):
        response = http.post(
            f"/conversations/{cid}/{action}", data={"text": "hi", "at_step": "0"}, headers=submitter
        )
        assert response.status_code == 403, (action, response.status_code, response.text[:300])
    record = svc.store.get(cid)
    assert not record.closed and record.queued == 0


def test_the_batch_page_refuses_a_submitter_cancelling_someone_elses_batch(
    http: FlaskClient, svc: Services, submitter: dict[str, str], operator: dict[str, str]
) -> None:
    bid = svc.batches.create(BatchConfig(), created_by="someone-else")
    refused = http.post(f"/batches/{bid}/cancel", headers=submitter)
    assert refused.status_code == 403
    assert svc.batches.info(bid).status is not BatchStatus.CANCELLED
    allowed = http.post(f"/batches/{bid}/cancel", headers=operator)
    assert allowed.status_code == 302
    assert svc.batches.info(bid).status is BatchStatus.CANCELLED


def test_the_conversation_page_is_a_timeline_of_its_steps(
    signed_in: FlaskClient, svc: Services
) -> None:
    cid = svc.client.new_conversation().conversation_id
    asked = Step.user_input("hello", turn_id="t1", index=0)
    answered = Step.model_response(
        turn_id="t1", index=1, status=asked.status, content="hi"
    ).model_copy(update={"at": asked.at + 12.4 if asked.at else None})
    untimed = Step.tool_result(
        ToolCall(id="c", name="clock"), "12:00", turn_id="t1", index=2, status=asked.status
    )
    untimed = untimed.model_copy(update={"at": None})  # recorded before steps kept their time
    HistoryStore(svc.redis, svc.keys, cid).append(asked, answered, untimed, start_turn=True)
    html = signed_in.get(f"/conversations/{cid}").text
    assert asked.at is not None
    times = re.findall(r'<p class="step-time"><time datetime="([^"]+)"', html)
    expected = [datetime.fromtimestamp(at, UTC) for at in (asked.at, asked.at + 12.4)]
    assert times == [at.isoformat(timespec="seconds") for at in expected]
    assert re.findall(r'class="muted step-gap"[^>]*>\+([^<]+)<', html) == ["12 s"]


def test_steps_carry_their_time_but_deltas_do_not() -> None:
    before = datetime.now(UTC).timestamp()
    step = Step.finish(turn_id="t", index=3, structured_output=None, usage=None)
    assert step.at is not None and before <= step.at <= datetime.now(UTC).timestamp()
    assert Step.model_delta(index=1, content_delta="x").at is None
    assert Step.model_validate_json(step.model_dump_json()).at == step.at
