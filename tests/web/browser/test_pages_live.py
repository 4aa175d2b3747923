"""The operator UI in headless Chromium, against a real server, Redis and Celery worker."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from shared.archive.archiver import Archiver
from shared.errors import Conflict
from tests.web.browser.kit import LiveServer, new_conversation, shot
from tests.web.conftest import OPERATOR

pytestmark = pytest.mark.browser


def test_a_turn_streams_live_and_abort_stops_it(
    page: Page, api: httpx.Client, server: LiveServer
) -> None:
    cid = new_conversation(api)
    page.goto(f"{server.url}/conversations/{cid}")
    expect(page.locator("#stream-state")).to_have_attribute("data-state", "open")
    sent = api.post(
        f"/api/v1/conversations/{cid}/prompts", json={"text": "A long story #slow #long"}
    )
    assert sent.status_code == 202
    turn_id = sent.json()["turn_id"]
    live_text = page.locator("#live .streaming .live-text")
    expect(live_text).to_contain_text("[demo model]", timeout=15_000)
    expect(page.locator("#live details.thinking")).to_contain_text("The user asks")
    expect(page.locator("#status .badge")).to_have_text("running")
    expect(page.locator("#empty-history")).to_have_count(0)
    shot(page, "conversation-streaming")
    page.once("dialog", lambda dialog: dialog.accept())  # "Abort the running turn...?"
    page.click("#abort-form button")
    expect(page.locator("#live .turn-end.cancelled")).to_contain_text("aborted", timeout=15_000)
    expect(page.locator("#status .badge")).to_have_text("idle")
    shot(page, "conversation-aborted")
    turn = api.get(f"/api/v1/conversations/{cid}/turns/{turn_id}").json()
    assert turn["status"] == "cancelled"
    shown = page.locator("#live .step-text_response > .text").last.inner_text()
    assert shown.startswith("[demo model]")
    assert len(shown.split()) < 150  # cut short: the whole #long answer is 200 words
    expect(page.locator("#notice")).to_have_text("Abort requested.")


def test_prompt_from_the_page_completes_and_survives_a_reload(
    page: Page, api: httpx.Client, server: LiveServer
) -> None:
    cid = new_conversation(api, system_prompt="<b>not bold</b>")
    page.goto(f"{server.url}/conversations/{cid}")
    expect(page.locator("#stream-state")).to_have_attribute("data-state", "open")
    page.fill("#prompt-text", "Hello <img src=x onerror=alert(1)>")
    page.click("#prompt-form button[type=submit]")
    expect(page.locator("#live .turn-end.completed")).to_be_visible(timeout=15_000)
    answer = page.locator("#live .step-text_response > .text").last
    expect(answer).to_contain_text("[demo model] You said")
    expect(answer).to_contain_text("<img src=x onerror=alert(1)>")  # shown as text
    assert page.locator("#live img").count() == 0
    shot(page, "conversation-completed")
    final = api.get(f"/api/v1/conversations/{cid}").json()
    assert final["status"] == "idle" and final["turn_count"] == 1
    page.reload()
    expect(page.locator("#history .step-user_input")).to_have_count(1)
    expect(page.locator("#history .step-text_response > .text")).to_contain_text("You said")
    expect(page.locator("#stream-state")).to_have_attribute("data-state", "open")
    assert page.locator("#live .step").count() == 0  # nothing replayed twice
    page.goto(f"{server.url}/usage")
    expect(page.locator("#usage-chart rect.bar").first).to_be_visible()
    shot(page, "usage")


def _pending_note(api: httpx.Client, cid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        items = api.get("/api/v1/notifications", params={"conversation_id": cid}).json()["items"]
        if items:
            return dict(items[0])
        time.sleep(0.05)
    raise AssertionError(f"no notification for conversation {cid}")


def test_allow_and_deny_from_the_inbox(page: Page, api: httpx.Client, server: LiveServer) -> None:
    cid = new_conversation(api, tools={"calculator": "ask"})
    sent = api.post(
        f"/api/v1/conversations/{cid}/prompts",
        json={"text": 'call calculator {"expression": "6*7"}'},
    )
    assert sent.status_code == 202
    note = _pending_note(api, cid)
    page.goto(f"{server.url}/approvals?conversation_id={cid}")
    expect(page.locator("#pending-count")).to_have_text("1")
    page.click(f"#inbox a[href^='/approvals/{note['id']}']")
    expect(page.locator("#arguments")).to_have_value('{\n  "expression": "6*7"\n}')
    shot(page, "approval-detail")
    page.click("#allow-form button[type=submit]")
    expect(page.locator(".flash-info")).to_have_text(
        f"Allowed calculator expression 6*7 (conversation {cid[:8]}…)."
    )
    expect(page.locator("#inbox-empty")).to_be_visible()
    page.goto(f"{server.url}/conversations/{cid}")
    answer = page.locator(".step-text_response > .text").last
    expect(answer).to_contain_text('"result": 42', timeout=15_000)
    expect(page.locator("#status .badge")).to_have_text("idle")
    expect(page.locator("#stream-state")).to_have_attribute("data-state", "open")

    page.fill("#prompt-text", 'call calculator {"expression": "2**64"}')
    page.click("#prompt-form button[type=submit]")
    expect(page.locator("#live .turn-end.waiting")).to_contain_text("Allow calculator?")
    denied = _pending_note(api, cid)
    page.goto(f"{server.url}/approvals/{denied['id']}")
    page.fill("#reason", "too big for a demo")
    page.click("#deny-form button[type=submit]")
    expect(page.locator(".flash-info")).to_have_text(
        f"Denied calculator expression 2**64 (conversation {cid[:8]}…)."
    )
    page.goto(f"{server.url}/conversations/{cid}")
    last = page.locator(".step-text_response > .text").last
    expect(last).to_contain_text("calculator was denied", timeout=15_000)
    expect(last).to_contain_text("too big for a demo")
    shot(page, "conversation-denied")
    turns = api.get(f"/api/v1/conversations/{cid}").json()
    assert turns["turn_count"] == 2 and turns["status"] == "idle"


def test_batch_page_follows_progress(page: Page, api: httpx.Client, server: LiveServer) -> None:
    items = [{"id": f"s{i}", "prompt": f"slow item {i} #slow"} for i in range(2)]
    created = api.post("/api/v1/batches", json={"items": items, "config": {"max_concurrency": 1}})
    assert created.status_code == 201, created.text
    bid = created.json()["batch"]["id"]
    page.goto(f"{server.url}/batches/{bid}")
    expect(page.locator("#batch-status")).to_have_text("running")
    expect(page.locator("#batch-status")).to_have_text("done", timeout=30_000)
    expect(page.locator("#batch-progress progress")).to_have_attribute("value", "2")
    expect(page.locator("#batch-counts td[data-state=done]")).to_have_text("2")
    expect(page.locator("#batch-notice")).to_be_visible()
    expect(page.locator("#cancel-form")).to_be_hidden()
    shot(page, "batch-done")
    expect(page.locator("#results tbody tr[data-status=done]")).to_have_count(2)  # live
    expect(page.locator("#results")).to_contain_text("slow item 1")


def test_the_operator_sets_a_tool_policy_that_binds_submitters(
    page: Page, api: httpx.Client, server: LiveServer
) -> None:
    page.goto(f"{server.url}/policy")
    row = page.locator("#tools tr[data-tool=calculator]")
    expect(row.locator(".badge")).to_have_text("auto")
    row.locator("select[name=policy]").select_option("deny")
    row.locator("button.set-policy").click()
    expect(page.locator("#tools tr[data-tool=calculator] .badge")).to_have_text("deny")
    expect(page.locator("#rules tr[data-rule='calculator|*']")).to_be_visible()
    expect(page.locator("#policy-log tbody tr").first).to_contain_text(OPERATOR[0])
    shot(page, "policy")
    refused = api.post("/api/v1/conversations", json={"tools": {"calculator": "auto"}})
    assert refused.status_code == 403 and "tools.calculator" in refused.text
    cid = new_conversation(api)
    page.goto(f"{server.url}/conversations/{cid}")
    page.click("#tool-policy summary")
    expect(page.locator("#tool-policy tr[data-tool=calculator] .badge")).to_have_text("deny")
    page.goto(f"{server.url}/policy")
    page.locator("#rules tr[data-rule='calculator|*'] button").click()
    expect(page.locator("#tools tr[data-tool=calculator] .badge")).to_have_text("auto")
    assert server.services.policies.load().rules == ()


def test_an_archived_conversation_reads_only_and_an_operator_restores_it(
    page: Page, api: httpx.Client, server: LiveServer
) -> None:
    cid = new_conversation(api)
    sent = api.post(f"/api/v1/conversations/{cid}/prompts", json={"text": "Keep <b>this</b>"})
    assert sent.status_code == 202
    _wait_idle(api, cid)
    svc = server.services
    _archive_once_released(Archiver(svc.redis, svc.keys, svc.settings), cid)

    page.goto(f"{server.url}/conversations/{cid}")
    expect(page.locator("#status")).to_have_text("archived")
    expect(page.locator("#history .step-user_input")).to_contain_text("Keep <b>this</b>")
    assert page.locator("#history b").count() == 0  # the prompt's markup is shown as text
    expect(page.locator("#history .step-text_response > .text")).to_contain_text("You said")
    assert page.locator("#prompt-form").count() == 0  # read-only: nothing can be sent
    shot(page, "conversation-archived")

    page.once("dialog", lambda dialog: dialog.accept())  # "Bring this conversation back...?"
    page.click("#restore-form button")
    expect(page.locator("#stream-state")).to_have_attribute("data-state", "open")
    expect(page.locator("#history .step-user_input")).to_have_count(1)
    page.fill("#prompt-text", "and after the restore")
    page.click("#prompt-form button[type=submit]")
    expect(page.locator("#live .turn-end.completed")).to_be_visible(timeout=15_000)
    assert api.get(f"/api/v1/conversations/{cid}").json()["turn_count"] == 2


def _archive_once_released(archiver: Archiver, cid: str) -> None:
    """Archives `cid`, waiting out the moment between its turn's end and the worker's lease
    release, when the archiver rightly calls it busy."""
    deadline = time.monotonic() + 10
    while True:
        try:
            assert archiver.archive(cid)
            return
        except Conflict:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _wait_idle(api: httpx.Client, cid: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = api.get(f"/api/v1/conversations/{cid}").json()
        if found["status"] == "idle" and found["turn_count"] == 1:
            return
        time.sleep(0.05)
    raise AssertionError(f"conversation {cid} did not finish its turn")
