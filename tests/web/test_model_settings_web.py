"""Model settings at the web edge: the API refuses what the provider cannot honour (422 naming
the setting and the provider, nothing queued), and the conversation page shows the settings."""

from __future__ import annotations

from flask.testing import FlaskClient

from tests.web.conftest import new_conversation, submit_batch
from webui.services import Services


def test_api_refuses_a_setting_the_provider_cannot_honour(
    http: FlaskClient, operator: dict[str, str], svc: Services
) -> None:
    before = svc.store.client.zcard(svc.store.keys.conversations(0))
    created = http.post(
        "/api/v1/conversations",
        json={
            "provider": "ollama",
            "model": "qwen",
            "model_settings": {"parallel_tool_calls": True},
        },
        headers=operator,
    )
    assert created.status_code == 422, created.text
    message = created.json["error"]["message"]
    assert "model_settings.parallel_tool_calls" in message and "'ollama'" in message
    assert svc.store.client.zcard(svc.store.keys.conversations(0)) == before

    cid = new_conversation(http, operator, provider="ollama", model="qwen")
    sent = http.post(
        f"/api/v1/conversations/{cid}/prompts",
        json={"text": "hi", "model_settings": {"parallel_tool_calls": True}},
        headers=operator,
    )
    assert sent.status_code == 422, sent.text
    assert "parallel_tool_calls" in sent.json["error"]["message"]
    record = svc.store.get(cid)
    assert record.queued == 0 and record.active_turn == ""

    bad = http.post(
        "/api/v1/conversations",
        json={"provider": "openai", "model": "m", "model_settings": {"temperature": 3}},
        headers=operator,
    )
    assert bad.status_code == 422 and "temperature" in bad.text


def test_conversation_api_and_page_show_the_settings(
    signed_in: FlaskClient, operator: dict[str, str]
) -> None:
    settings = {"stop": ["<b>x</b>"], "seed": 11, "max_output_tokens": 64}
    cid = new_conversation(
        signed_in, operator, provider="openai", model="m", model_settings=settings
    )
    shown = signed_in.get(f"/api/v1/conversations/{cid}", headers=operator).json
    assert shown["config"]["model_settings"]["seed"] == 11
    assert shown["config"]["model_settings"]["stop"] == ["<b>x</b>"]
    html = signed_in.get(f"/conversations/{cid}").text
    assert 'data-setting="seed"' in html and "<code>11</code>" in html
    assert 'data-setting="max_output_tokens"' in html and "<code>64</code>" in html
    assert "\\u003cb\\u003ex\\u003c/b\\u003e" in html and "<b>x</b>" not in html


def test_a_batch_item_whose_settings_the_provider_cannot_honour_is_invalid(
    http: FlaskClient, operator: dict[str, str], svc: Services
) -> None:
    items = [
        {"id": "ok", "prompt": "hi", "model_settings": {"max_output_tokens": 5}},
        {"id": "no", "prompt": "hi", "model_settings": {"temperature": 0.5}},
    ]
    created = submit_batch(http, operator, items, config={"max_concurrency": 1})
    assert created["submitted"] == 1
    [invalid] = created["invalid"]
    assert invalid["id"] == "no"
    assert "model_settings.temperature: provider 'scripted' cannot honour it" in invalid["error"]
    refused = http.post(
        "/api/v1/batches",
        json={
            "items": [{"id": "x", "prompt": "hi"}],
            "config": {"conversation": {"model_settings": {"top_p": 0.5}}},
        },
        headers=operator,
    )
    assert refused.status_code == 422 and "top_p" in refused.json["error"]["message"]
