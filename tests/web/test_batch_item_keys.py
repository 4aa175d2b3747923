"""A batch item carries item fields only: a gate key is refused as on a conversation (403 below
the operator role, naming it), any other unknown key is a 422 naming it; nothing is submitted."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from shared.models.config import ToolPolicy
from shared.settings import Settings
from shared.store.batches import parse_line
from shared.store.policy import ToolInfo
from webui.services import Services


@pytest.fixture(autouse=True)
def described_tools(svc: Services) -> None:
    svc.policies.publish_catalog(
        [
            ToolInfo(name="calculator", default_policy=ToolPolicy.AUTO),
            ToolInfo(name="send_email", default_policy=ToolPolicy.ASK),
        ]
    )


def _submit(http: FlaskClient, headers: dict[str, str], items: list[Any]) -> Any:
    return http.post("/api/v1/batches", json={"items": items}, headers=headers)


def _no_batches(http: FlaskClient, headers: dict[str, str]) -> None:
    assert http.get("/api/v1/batches", headers=headers).json["items"] == []


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"allow_all": True}, "items[1].allow_all"),
        ({"tools": {"send_email": "auto"}}, "items[1].tools.send_email"),
        ({"labels": ["prod"]}, "items[1].labels"),
    ],
)
def test_a_submitters_item_that_loosens_the_gate_is_a_403_naming_it(
    http: FlaskClient, submitter: dict[str, str], extra: dict[str, Any], field: str
) -> None:
    items = [{"prompt": "a"}, {"prompt": "b", **extra}]
    answer = _submit(http, submitter, items)
    assert answer.status_code == 403, answer.text
    assert answer.json["error"]["message"].startswith(field), answer.text
    assert {"field": field} in answer.json["error"]["details"]
    _no_batches(http, submitter)


@pytest.mark.parametrize(
    ("caller", "extra", "field"),
    [
        ("operator", {"allow_all": True}, "allow_all"),
        ("operator", {"tools": {"send_email": "auto"}}, "tools"),
        ("submitter", {"tools": {"send_email": "deny"}}, "tools"),  # tightening: still ignored
        ("submitter", {"system_prompt": "Be terse."}, "system_prompt"),
        ("submitter", {"promt": "typo"}, "promt"),
    ],
)
def test_any_other_unknown_item_key_is_a_422_naming_it(
    request: pytest.FixtureRequest,
    http: FlaskClient,
    caller: str,
    extra: dict[str, Any],
    field: str,
) -> None:
    headers = request.getfixturevalue(caller)
    answer = _submit(http, headers, [{"prompt": "a", "timeout_s": 30, **extra}])
    assert answer.status_code == 422, answer.text
    error = answer.json["error"]
    assert error["message"].startswith(f"items[0].{field}: "), error
    assert error["details"] == [{"loc": ["items", 0, field], "message": "not an item field"}]
    _no_batches(http, headers)


def test_a_batch_files_line_with_a_gate_key_is_invalid_naming_it() -> None:
    line = parse_line(3, '{"id": "x", "prompt": "hi", "allow_all": true}', Settings())
    assert line is not None and line.prompt is None
    assert line.error.startswith("line 3: 'allow_all': not an item field"), line.error
    fine = parse_line(4, '{"id": "y", "prompt": "hi", "timeout_s": 5}', Settings())
    assert fine is not None and fine.error == "" and fine.options is not None
