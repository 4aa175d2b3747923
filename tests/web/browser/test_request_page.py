"""The request page and the inbox in headless Chromium: live when a request is settled from the
CLI or the API while the page is open, the conversation header live while a turn streams, the
request page's keys and first field, the skip link to the rows, and the focus ring's contrast."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from shared.models.users import Role
from shared.store.claims import Claims
from tests.stack import run_cli
from tests.web.browser.kit import ARTIFACTS, LiveServer, new_conversation, shot, signed_in

pytestmark = pytest.mark.browser


def _ask(api: httpx.Client, expression: str) -> tuple[str, dict[str, Any]]:
    """A conversation parked on a calculator call, and its pending request."""
    cid = new_conversation(api, tools={"calculator": "ask"})
    prompt = f'call calculator {{"expression": "{expression}"}}'
    assert api.post(f"/api/v1/conversations/{cid}/prompts", json={"text": prompt}).is_success
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = api.get("/api/v1/notifications", params={"conversation_id": cid}).json()
        if found["items"]:
            return cid, dict(found["items"][0])
        time.sleep(0.05)
    raise AssertionError(f"no request from conversation {cid}")


def _open(page: Page, server: LiveServer, path: str) -> None:
    """Opens `path` with its live feed connected, and marks the page to tell a reload."""
    page.goto(f"{server.url}{path}")
    expect(page.locator("body[data-live='open']")).to_have_count(1)
    page.evaluate("window.notReloaded = true")


def test_a_request_settled_from_the_cli_loses_its_buttons_without_a_reload(
    page: Page, api: httpx.Client, server: LiveServer, stack_env: dict[str, str]
) -> None:
    _, note = _ask(api, "1+2")
    _open(page, server, f"/approvals/{note['id']}")
    expect(page.locator("#allow-form")).to_be_visible()
    expect(page.locator("#request-title")).to_have_text("calculator expression 1+2")
    denied = run_cli(stack_env, "approvals", "deny", note["id"], "--reason", "from the terminal")
    assert denied.returncode == 0, denied.stderr
    expect(page.locator("#allow-form")).to_have_count(0)
    expect(page.locator("#deny-form")).to_have_count(0)
    expect(page.locator("#outcome")).to_contain_text("resolved: deny")
    expect(page.locator("#outcome")).to_contain_text("from the terminal")
    expect(page.locator("#request-status .badge")).to_have_text("resolved")
    expect(page.locator("#announcer")).to_contain_text("Decided elsewhere")
    assert page.evaluate("window.notReloaded") is True
    shot(page, "request-settled-elsewhere")


def test_a_request_allowed_through_the_api_shows_its_outcome_live(
    page: Page, api: httpx.Client, server: LiveServer
) -> None:
    _, note = _ask(api, "2+3")
    token = server.services.tokens.create("live approver", Role.APPROVER)
    _open(page, server, f"/approvals/{note['id']}")
    page.fill("#reason", "half typed")  # a person at work on it: the outcome still replaces it
    allowed = httpx.post(
        f"{server.url}/api/v1/notifications/{note['id']}/resolve",
        json={"kind": "allow"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert allowed.status_code == 200, allowed.text
    expect(page.locator("#outcome")).to_contain_text("resolved: allow by live approver")
    expect(page.locator("#allow-next")).to_have_count(0)
    assert page.evaluate("window.notReloaded") is True


def test_the_conversation_header_counts_follow_the_turn_without_a_reload(
    page: Page, api: httpx.Client, server: LiveServer
) -> None:
    cid = new_conversation(api)
    page.goto(f"{server.url}/conversations/{cid}")
    expect(page.locator("#stream-state")).to_have_attribute("data-state", "open")
    expect(page.locator("#turn-count")).to_have_text("0")
    page.evaluate("window.notReloaded = true")
    sent = api.post(f"/api/v1/conversations/{cid}/prompts", json={"text": "story #slow #long"})
    assert sent.status_code == 202
    expect(page.locator("#live .streaming")).to_be_visible(timeout=15_000)
    expect(page.locator("#turn-count")).to_have_text("1")  # while the body streams
    expect(page.locator("#live .turn-end.completed")).to_be_visible(timeout=30_000)
    usage = api.get(f"/api/v1/conversations/{cid}").json()
    tokens = str(usage["usage"]["total"]["total_token_count"])
    assert tokens != "0"
    expect(page.locator("#token-count")).to_have_text(tokens)
    assert page.evaluate("window.notReloaded") is True


def test_the_request_page_starts_in_its_first_field_and_answers_keys(
    page: Page, api: httpx.Client, server: LiveServer
) -> None:
    _, first = _ask(api, "10+1")
    _, second = _ask(api, "10+2")
    _, third = _ask(api, "10+3")
    page.goto(f"{server.url}/approvals/{first['id']}?tool=calculator")
    expect(page.locator("#arguments")).to_be_focused()
    page.keyboard.press("a")  # typed into the arguments: keys act outside fields only
    expect(page.locator("#allow-form")).to_be_visible()
    page.keyboard.press("Escape")
    page.keyboard.press("?")
    expect(page.locator("#request-keys-help")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#request-keys-help")).to_be_hidden()
    page.keyboard.press("e")
    expect(page.locator("#arguments")).to_be_focused()
    page.keyboard.press("Escape")
    page.keyboard.press("n")  # the next request, this one left undecided
    expect(page).to_have_url(f"{server.url}/approvals/{second['id']}?tool=calculator")
    assert api.get(f"/api/v1/notifications/{first['id']}").json()["status"] == "pending"
    page.locator("#arguments").fill('{"expression": "10*2"}')
    page.keyboard.press("Control+Enter")  # allowed as edited, on to the next
    expect(page.locator(".flash-info")).to_contain_text("calculator expression 10+2")
    expect(page.locator(".flash-info")).to_contain_text("with edited arguments")
    expect(page.locator("#arguments")).to_be_focused()  # the next request's first field
    page.keyboard.press("Escape")
    page.keyboard.press("d")
    expect(page.locator("#reason")).to_be_focused()
    page.keyboard.type("not now")
    page.keyboard.press("Enter")  # "Deny and next"
    expect(page.locator(".flash-info")).to_contain_text("Denied calculator expression")
    expect(page.locator("#arguments")).to_be_focused()
    page.keyboard.press("Escape")
    page.keyboard.press("a")  # allow and next
    expect(page.locator(".flash-info")).to_contain_text("Allowed calculator expression")
    statuses = [
        api.get(f"/api/v1/notifications/{note['id']}").json()["resolution"]["kind"]
        for note in (second, third, first)
    ]
    assert sorted(statuses) == ["allow", "allow", "deny"], statuses


FOCUS_RING = """(selector) => {
  const rgb = (css) => css.match(/[\\d.]+/g).map(Number).slice(0, 3);
  const lum = ([r, g, b]) => [r, g, b].map((v) => {
    v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  }).reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const el = document.activeElement;
  const style = getComputedStyle(el);
  let node = el.closest(selector), back = [255, 255, 255];
  for (; node; node = node.parentElement) {
    const c = getComputedStyle(node).backgroundColor.match(/[\\d.]+/g).map(Number);
    if (c.length < 4 || c[3] > 0) { back = c.slice(0, 3); break; }
  }
  const a = lum(rgb(style.outlineColor)), b = lum(back);
  return {style: style.outlineStyle, width: parseFloat(style.outlineWidth),
          ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)};
}"""


def test_the_skip_link_reaches_the_first_rows_allow_in_a_few_tabs_and_focus_shows(
    browser: Browser, api: httpx.Client, server: LiveServer
) -> None:
    cid, _ = _ask(api, "7+7")
    with signed_in(browser, server, width=1280, height=900) as tab:
        tab.goto(f"{server.url}/approvals?conversation_id={cid}")
        tab.keyboard.press("Tab")  # "Skip to content"
        tab.keyboard.press("Tab")
        assert tab.evaluate("document.activeElement.id") == "skip-to-rows"
        tab.keyboard.press("Enter")
        presses = 3
        seen = []
        while tab.evaluate("document.activeElement.className") != "allow":
            tab.keyboard.press("Tab")
            presses += 1
            seen.append(tab.evaluate("document.activeElement.outerHTML.slice(0, 80)"))
            assert presses <= 8, f"the first row's Allow is more than 8 keys away: {seen}"
        assert tab.evaluate("document.activeElement.closest('tr').dataset.nid").startswith(cid)
        (ARTIFACTS / "inbox-keys-to-allow.txt").write_text(f"{presses}\n")
        shot(tab, "inbox-keyboard-allow")
        main = tab.evaluate(FOCUS_RING, "main")
        assert main["style"] == "solid" and main["width"] >= 2 and main["ratio"] >= 3, main
        tab.goto(f"{server.url}/approvals")
        tab.keyboard.press("Tab")
        tab.keyboard.press("Tab")
        tab.keyboard.press("Tab")  # the brand link, on the dark nav bar
        assert tab.evaluate("document.activeElement.closest('header.top') !== null")
        nav = tab.evaluate(FOCUS_RING, "header.top")
        assert nav["style"] == "solid" and nav["ratio"] >= 3, nav


def test_the_usage_page_counts_a_turn_sent_from_the_cli_without_a_reload(
    page: Page, api: httpx.Client, server: LiveServer, stack_env: dict[str, str]
) -> None:
    def today() -> tuple[str, int]:
        days = api.get("/api/v1/usage").json()["day_totals"]
        newest = max(days, default="")
        return newest, int(days[newest]["total_token_count"]) if newest else 0

    _, before = today()
    _open(page, server, "/usage")
    sent = run_cli(stack_env, "submit", "hello from the terminal", "--follow")
    assert sent.returncode == 0, sent.stderr
    day, after = today()
    assert after > before
    row = page.locator(f"#usage-days tr[data-day='{day}'] td").nth(1)
    expect(row).to_have_text(str(after))
    assert page.evaluate("window.notReloaded") is True


def test_a_claim_made_elsewhere_shows_in_an_open_inbox_without_a_reload(
    page: Page, api: httpx.Client, server: LiveServer
) -> None:
    cid, note = _ask(api, "5+5")
    _open(page, server, f"/approvals?conversation_id={cid}")
    row = page.locator(f"#inbox tr[data-nid='{note['id']}']")
    expect(row.locator(".claim")).to_have_count(0)
    claims = Claims(server.services.notifications)
    claims.claim(note["id"], actor="another operator")
    expect(row.locator(".claim")).to_have_text("claimed by another operator")
    claims.release(note["id"], actor="another operator")
    expect(row.locator(".claim")).to_have_count(0)
    assert page.evaluate("window.notReloaded") is True
