"""POST /api/v1/conversations/<cid>/fork: the copy, who may fork, the gate and at_step."""

from __future__ import annotations

import re

from flask.testing import FlaskClient

from shared.models.steps import Step, StepStatus, ToolCall, UsageMetadata
from tests.web.conftest import OPERATOR, new_conversation, page_csrf
from webui.services import Services

USAGE = UsageMetadata.from_counts(10, 5)


def _turn_with_tool(turn: str, index: int) -> list[Step]:
    call = ToolCall(id=f"{turn}-call", name="echo", args={"text": "x"})
    return [
        Step.user_input(f"prompt {turn}", turn_id=turn, index=index),
        Step.model_response(
            turn_id=turn, index=index + 1, status=StepStatus.DONE, tool_calls=[call], usage=USAGE
        ),
        Step.tool_result(call, "x", turn_id=turn, index=index + 2, status=StepStatus.DONE),
        Step.model_response(
            turn_id=turn,
            index=index + 3,
            status=StepStatus.DONE,
            content=f"answer {turn}",
            usage=USAGE,
        ),
    ]


def _two_turns(svc: Services, cid: str) -> list[Step]:
    """Writes two turns of four steps each (a tool call and its result in each)."""
    history = svc.stores.history(cid)
    steps = []
    for turn, index in (("t1", 0), ("t2", 4)):
        turn_steps = _turn_with_tool(turn, index)
        history.append(*turn_steps, usage=USAGE + USAGE, start_turn=True)
        steps += turn_steps
    return steps


def _fork(http: FlaskClient, cid: str, headers: dict[str, str], **body: object) -> object:
    return http.post(f"/api/v1/conversations/{cid}/fork", json=body, headers=headers)


def test_fork_copies_the_first_steps_and_leaves_the_original(
    http: FlaskClient, svc: Services, submitter: dict[str, str]
) -> None:
    cid = new_conversation(http, submitter, system_prompt="be brief")
    steps = _two_turns(svc, cid)
    before = svc.stores.history(cid).snapshot()

    response = _fork(http, cid, submitter, at_step=5)
    assert response.status_code == 201, response.text
    new = response.json["id"]
    assert new != cid
    assert response.headers["Location"].endswith(f"/conversations/{new}")
    assert response.json["status"] == "idle"
    assert response.json["config"]["system_prompt"] == "be brief"
    assert svc.store.get(new).owner == svc.store.get(cid).owner

    fork = svc.stores.history(new).snapshot()
    assert fork.steps == steps[:5]
    assert fork.turn_start_indices == [0, 4]
    assert (
        fork.cumulative_usage == USAGE + USAGE
    )  # the copied steps' usage: the first turn's two calls
    assert fork.last_response == "answer t1"
    assert svc.stores.history(cid).snapshot() == before


def test_fork_at_zero_and_at_the_end(
    http: FlaskClient, svc: Services, operator: dict[str, str]
) -> None:
    cid = new_conversation(http, operator)
    steps = _two_turns(svc, cid)
    empty = _fork(http, cid, operator, at_step=0)
    assert empty.status_code == 201
    assert svc.stores.history(empty.json["id"]).snapshot().steps == []
    whole = _fork(http, cid, operator, at_step=8, conversation_id="whole-copy")
    assert whole.status_code == 201
    assert whole.json["id"] == "whole-copy"
    snapshot = svc.stores.history("whole-copy").snapshot()
    assert snapshot.steps == steps
    assert snapshot.cumulative_usage == svc.stores.history(cid).snapshot().cumulative_usage


def test_at_step_past_the_history_or_inside_a_tool_call_is_422(
    http: FlaskClient, svc: Services, operator: dict[str, str]
) -> None:
    cid = new_conversation(http, operator)
    _two_turns(svc, cid)
    count = svc.store.count()
    for at_step, words in ((9, "beyond the history's 8 steps"), (2, "cuts between the tool call")):
        response = _fork(http, cid, operator, at_step=at_step)
        assert response.status_code == 422, response.text
        assert "at_step" in response.json["error"]["message"]
        assert words in response.json["error"]["message"]
    assert _fork(http, cid, operator, at_step=-1).status_code == 422
    assert _fork(http, cid, operator).status_code == 422
    assert svc.store.count() == count  # nothing made


def test_a_finished_turn_counts_its_finish_steps_usage_once(
    http: FlaskClient, svc: Services, operator: dict[str, str]
) -> None:
    cid = new_conversation(http, operator)
    turn = _turn_with_tool("t1", 0)
    finish = Step.finish(turn_id="t1", index=4, structured_output=None, usage=USAGE + USAGE)
    svc.stores.history(cid).append(*turn, finish, usage=USAGE + USAGE, start_turn=True)
    fork = _fork(http, cid, operator, at_step=5)
    assert fork.status_code == 201
    assert fork.json["usage"]["total"] == (USAGE + USAGE).model_dump()
    assert (
        fork.json["usage"]
        == http.get(f"/api/v1/conversations/{cid}", headers=operator).json["usage"]
    )


def test_a_parked_call_cannot_be_copied_without_its_result(
    http: FlaskClient, svc: Services, operator: dict[str, str]
) -> None:
    cid = new_conversation(http, operator)
    _two_turns(svc, cid)
    svc.stores.history(cid).append(*_turn_with_tool("t3", 8)[:2], start_turn=True)
    assert _fork(http, cid, operator, at_step=10).status_code == 422
    cut = _fork(http, cid, operator, at_step=9)  # the prompt, before the call
    assert cut.status_code == 201
    assert len(svc.stores.history(cut.json["id"]).snapshot().steps) == 9


def test_who_may_fork(
    http: FlaskClient,
    svc: Services,
    viewer: dict[str, str],
    submitter: dict[str, str],
    operator: dict[str, str],
) -> None:
    mine = new_conversation(http, submitter)
    theirs = new_conversation(http, operator)
    assert _fork(http, mine, viewer, at_step=0).status_code == 403
    assert _fork(http, theirs, submitter, at_step=0).status_code == 403
    assert _fork(http, "nope", operator, at_step=0).status_code == 404
    by_operator = _fork(http, mine, operator, at_step=0)
    assert by_operator.status_code == 201
    assert svc.store.get(by_operator.json["id"]).owner == "operator token"
    taken = _fork(http, mine, operator, at_step=0, conversation_id=by_operator.json["id"])
    assert taken.status_code == 409


def test_a_submitter_cannot_loosen_the_gate_by_forking(
    http: FlaskClient, svc: Services, submitter: dict[str, str], operator: dict[str, str]
) -> None:
    cid = new_conversation(http, submitter, tools={"echo": "deny"})
    for field, value in (("allow_all", True), ("tools", {"echo": "auto"}), ("labels", ["x"])):
        response = _fork(http, cid, submitter, at_step=0, **{field: value})
        assert response.status_code == 422, response.text
    chosen = _fork(http, cid, submitter, at_step=0, conversation_id="someone-else")
    assert chosen.status_code == 403
    fork = _fork(http, cid, submitter, at_step=0)
    assert fork.status_code == 201
    config = svc.store.get(fork.json["id"]).config
    original = svc.store.get(cid).config
    assert config.tools == original.tools
    assert config.allow_all is original.allow_all is False
    assert config.tools == {"echo": "deny"}


def test_fork_with_another_agent_version(
    http: FlaskClient, svc: Services, operator: dict[str, str], submitter: dict[str, str]
) -> None:
    agent = {"name": "triage", "system_prompt": "Sort it."}
    assert http.post("/api/v1/agents", json=agent, headers=operator).status_code == 201
    update = {"system_prompt": "Sort it better."}
    assert http.put("/api/v1/agents/triage", json=update, headers=operator).status_code == 200
    cid = new_conversation(http, submitter, agent="triage", agent_version=1)
    _two_turns(svc, cid)
    fork = _fork(http, cid, submitter, at_step=4, agent_version=2)
    assert fork.status_code == 201, fork.text
    config = fork.json["config"]
    assert (config["agent"], config["agent_version"]) == ("triage", 2)
    assert config["system_prompt"] == "Sort it better."
    assert svc.store.get(cid).config.agent_version == 1
    plain = new_conversation(http, submitter)
    refused = _fork(http, plain, submitter, at_step=0, agent_version=2)
    assert refused.status_code == 422
    assert "agent_version" in refused.json["error"]["message"]


def test_the_fork_button_on_a_step(signed_in: FlaskClient, svc: Services) -> None:
    cid = svc.client.new_conversation().conversation_id
    steps = _two_turns(svc, cid)
    html = signed_in.get(f"/conversations/{cid}").text
    positions = re.findall(r'name="at_step" value="(\d+)"', html)
    assert positions == ["1", "3", "4", "5", "7", "8"]  # never just after a tool call
    assert html.count("Fork from here") == 6
    token = page_csrf(signed_in)
    count = svc.store.count()
    no_csrf = signed_in.post(f"/conversations/{cid}/fork", data={"at_step": "4"})
    assert no_csrf.status_code == 403 and svc.store.count() == count
    forked = signed_in.post(
        f"/conversations/{cid}/fork", data={"at_step": "4", "csrf_token": token}
    )
    assert forked.status_code == 302
    new = forked.headers["Location"].rsplit("/", 1)[1]
    assert new != cid and svc.stores.history(new).snapshot().steps == steps[:4]
    assert svc.store.get(new).owner == OPERATOR[0]
    page = signed_in.get(forked.headers["Location"]).text
    assert f"Forked from {cid} with its first 4 steps." in page
    refused = signed_in.post(
        f"/conversations/{cid}/fork",
        data={"at_step": "2", "csrf_token": token},
        follow_redirects=True,
    )
    assert "cuts between the tool call" in refused.text
    assert (
        signed_in.post(
            f"/conversations/{cid}/fork",
            data={"at_step": "x", "csrf_token": token},
            follow_redirects=True,
        ).status_code
        == 200
    )
