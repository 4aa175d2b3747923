"""The operator's whole job in headless Chromium: a 200-prompt batch with 30 approvals.

Triaged from the home page with the keyboard and a bulk action, against a real server, Redis
and Celery worker. Every click is counted (the README quotes the count); every page is
shot at 1280 px and 390 px into test-artifacts/, and checked for overflow, labels and
contrast.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Dialog, Locator, Page, expect

from tests.web.browser.kit import ARTIFACTS, LiveServer, shot, signed_in

pytestmark = pytest.mark.browser

ITEMS = 200
ASKING = 30
CLICK_BUDGET = 5  # the README quotes the count (the bulk confirmation is one)


def _batch(api: httpx.Client) -> str:
    items: list[dict[str, Any]] = []
    for i in range(ITEMS):
        if i < ASKING:
            prompt = f'call calculator {{"expression": "{i}+1"}}'
        elif i == ASKING:
            prompt = "this one will #fail"
        else:
            prompt = f"hello number {i}"
        items.append({"id": f"item-{i:03d}", "prompt": prompt})
    config = {"conversation": {"tools": {"calculator": "ask"}}, "max_concurrency": 50}
    created = api.post("/api/v1/batches", json={"items": items, "config": config})
    assert created.status_code == 201, created.text
    return str(created.json()["batch"]["id"])


def _wait_pending(api: httpx.Client, bid: str, count: int) -> None:
    deadline = time.monotonic() + 60
    seen = -1
    while time.monotonic() < deadline:
        params = {"batch_id": bid, "limit": 1}
        seen = api.get("/api/v1/notifications", params=params).json()["pending_count"]
        if seen == count:
            return
        time.sleep(0.2)
    raise AssertionError(f"batch {bid}: {seen} pending, expected {count}")


class Clicks:
    """Clicks, counted: the job's cost to an operator."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, target: Locator) -> None:
        self.count += 1
        target.click()


@pytest.fixture(scope="module")
def batch_id(api: httpx.Client) -> str:
    bid = _batch(api)
    _wait_pending(api, bid, ASKING)
    return bid


@pytest.fixture
def ops_page(browser: Browser, server: LiveServer) -> Iterator[Page]:
    with signed_in(browser, server, width=1280, height=900) as tab:
        yield tab


def test_the_operator_triages_a_200_prompt_batch_in_5_clicks(
    ops_page: Page, api: httpx.Client, server: LiveServer, batch_id: str
) -> None:
    page, click = ops_page, Clicks()
    page.goto(f"{server.url}/")
    expect(page.locator("#nav-pending")).to_have_text(str(ASKING))
    expect(page).to_have_title(f"({ASKING}) Home · Signoff")
    group = page.locator("#pending-groups tr", has=page.locator(f"a[href='/batches/{batch_id}']"))
    expect(group.locator(".group-link")).to_have_text(f"{ASKING} to decide")
    shot(page, "console-home-1280")

    click(group.locator(".group-link"))  # 1: to the batch's requests, oldest first
    expect(page.locator("#inbox tbody tr")).to_have_count(ASKING)
    first = page.locator("#inbox tbody tr").first
    expect(first).to_have_class("current")
    # Oldest first: the order the items parked in. Each row names its item and its arguments.
    shown = [_row_request(row) for row in page.locator("#inbox tbody tr").all()[:3]]
    assert all(item == f"item-{int(expr.split('+')[0]):03d}" for item, expr in shown), shown
    page.keyboard.press("j")
    expect(page.locator("#inbox tbody tr").nth(1)).to_have_class("current")
    page.keyboard.press("k")
    expect(first).to_have_class("current")
    page.keyboard.press("?")
    expect(page.locator("#keys-help")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#keys-help")).to_be_hidden()
    shot(page, "console-inbox-1280")

    page.keyboard.press("e")  # the first request, to edit its arguments
    expect(page.locator("#arguments")).to_have_value(_arguments(shown[0][1]))
    shot(page, "console-approval-1280")
    page.fill("#arguments", '{"expression": "6*7"}')
    page.keyboard.press("Control+Enter")  # typed: allowed as edited, on to the next request
    expect(page.locator(".flash-info")).to_have_text(
        f"Allowed calculator expression {shown[0][1]} ({shown[0][0]} of batch {batch_id[:8]}) "
        "with edited arguments."
    )
    expect(page.locator("#arguments")).to_have_value(_arguments(shown[1][1]))
    assert "batch_id=" in page.url and "tool=calculator" in page.url
    expect(page.locator("#arguments")).to_be_focused()
    page.keyboard.press("Escape")  # out of the arguments; d goes to the reason
    page.keyboard.press("d")
    page.keyboard.type("not this one")
    page.keyboard.press("Enter")  # "Deny and next", the deny form's first button
    expect(page.locator("#arguments")).to_have_value(_arguments(shown[2][1]))

    click(page.locator("#back-to-inbox"))  # 2: back to the same filtered inbox
    expect(page.locator("#inbox tbody tr")).to_have_count(ASKING - 2)
    elsewhere = page.locator("#inbox tbody tr").last.get_attribute("data-nid")
    assert elsewhere is not None
    expect(page.locator("body[data-live='open']")).to_have_count(1)  # the live feed is on
    server.services.notifications.resolve(elsewhere, {"kind": "allow"}, actor="another operator")
    gone = page.locator(f"#inbox tr[data-nid='{elsewhere}']")
    expect(gone).to_have_class(re.compile("gone"))  # live, in place: greyed at once
    expect(gone.locator("button.allow")).to_be_disabled()
    expect(page.locator("#inbox tbody tr")).to_have_count(ASKING - 3, timeout=15_000)  # then gone
    expect(page.locator("#nav-pending")).to_have_text(str(ASKING - 3))

    left = ASKING - 3
    click(page.locator("#bulk-form button[value=allow]"))  # 3: "Allow all..." of this batch
    expect(page.locator("#bulk-count")).to_have_attribute("data-count", str(left))
    expect(page.locator("#bulk-filter")).to_contain_text(batch_id)
    click(page.locator("#bulk-confirm button[type=submit]"))  # 4: confirmed with the count
    # Nothing of the batch is left to decide: on to the batch, finishing live.
    expect(page).to_have_url(f"{server.url}/batches/{batch_id}")
    expect(page.locator(".flash-info")).to_contain_text(f"Allowed {left}")
    expect(page.locator("#nav-pending")).to_have_text("0")
    expect(page.locator("#batch-status")).to_have_text("done", timeout=60_000)
    expect(page.locator("#batch-bar rect[data-state=failed]")).to_have_count(1)
    expect(page.locator("#batch-bar rect[data-state=denied]")).to_have_count(1)
    # the table counts as the legend does: the denied item is not also "done"
    expect(page.locator("#batch-counts td[data-state=done]")).to_have_text(str(ITEMS - 2))
    expect(page.locator("#batch-bar a[data-state=done]")).to_have_text(f"done {ITEMS - 2}")
    expect(page.locator("#batch-counts td[data-state=denied]")).to_have_text("1")
    expect(page).to_have_title("Batch " + batch_id + " · Signoff")
    shot(page, "console-batch-1280")

    click(page.locator("#batch-bar a[data-state=failed]"))  # 5: the failure, in red
    failed = page.locator("#results tbody tr")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text(f"item-{ASKING:03d}")
    badge = failed.locator(".badge")
    expect(badge).to_have_text("failed")
    assert _is_reddish(badge.evaluate("e => getComputedStyle(e).backgroundColor"))

    assert click.count <= CLICK_BUDGET, f"the job took {click.count} clicks"
    (ARTIFACTS / "console-clicks.txt").write_text(f"{click.count}\n")

    page.goto(f"{server.url}/batches/{batch_id}?status=denied")
    denied = page.locator("#results tbody tr")
    expect(denied).to_have_count(1)
    expect(denied.locator(".badge")).to_have_text("denied")
    assert not _is_greenish(
        denied.locator(".badge").evaluate("e => getComputedStyle(e).backgroundColor")
    )


def _row_request(row: Locator) -> tuple[str, str]:
    """A row's batch item and the expression its summary shows."""
    summary = row.locator(".summary").inner_text()
    assert summary.startswith("expression="), summary
    item = row.locator("td").nth(2).inner_text().split("·")[-1].strip()
    return item, summary.removeprefix("expression=")


def _arguments(expression: str) -> str:
    return json.dumps({"expression": expression}, indent=2)


def _rgb(css: str) -> tuple[int, int, int]:
    red, green, blue = (int(part) for part in css[css.index("(") + 1 : -1].split(",")[:3])
    return red, green, blue


def _is_reddish(css: str) -> bool:
    red, green, blue = _rgb(css)
    return red > green + 10 and red > blue + 10


def _is_greenish(css: str) -> bool:
    red, green, blue = _rgb(css)
    return green > red + 10 and green > blue + 10


def _ask(api: httpx.Client, expression: str, **options: Any) -> tuple[str, dict[str, Any]]:
    """A conversation parked on a calculator call, and its pending request."""
    created = api.post("/api/v1/conversations", json={"tools": {"calculator": "ask"}, **options})
    assert created.status_code == 201, created.text
    cid = str(created.json()["id"])
    prompt = f'call calculator {{"expression": "{expression}"}}'
    sent = api.post(f"/api/v1/conversations/{cid}/prompts", json={"text": prompt})
    assert sent.status_code == 202, sent.text
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = api.get("/api/v1/notifications", params={"conversation_id": cid}).json()
        if found["items"]:
            return cid, dict(found["items"][0])
        time.sleep(0.05)
    raise AssertionError(f"no request from conversation {cid}")


def test_a_parked_conversation_shows_its_request_live_with_the_decision_inline(
    ops_page: Page, api: httpx.Client, server: LiveServer
) -> None:
    created = api.post("/api/v1/conversations", json={"tools": {"calculator": "ask"}})
    cid = str(created.json()["id"])
    ops_page.goto(f"{server.url}/conversations/{cid}")
    expect(ops_page.locator("#stream-state")).to_have_attribute("data-state", "open")
    prompt = 'call calculator {"expression": "20+22"}'
    assert api.post(f"/api/v1/conversations/{cid}/prompts", json={"text": prompt}).is_success
    inline = ops_page.locator("#pending-here .inline-approval")
    expect(inline).to_contain_text("calculator expression 20+22", timeout=15_000)  # arrived live
    expect(ops_page.locator("#announcer")).to_contain_text(re.compile("waiting", re.IGNORECASE))
    inline.locator("button.allow").click()
    expect(ops_page).to_have_url(f"{server.url}/conversations/{cid}")
    expect(ops_page.locator(".step-text_response > .text").last).to_contain_text(
        '"result": 42', timeout=15_000
    )
    expect(ops_page.locator("#pending-here .inline-approval")).to_have_count(0)


def test_failed_conversations_are_listed_as_failed_and_found_by_search(
    ops_page: Page, api: httpx.Client, server: LiveServer
) -> None:
    cid = str(api.post("/api/v1/conversations", json={}).json()["id"])
    sent = api.post(f"/api/v1/conversations/{cid}/prompts", json={"text": "zebra crossing #fail"})
    turn = f"/api/v1/conversations/{cid}/turns/{sent.json()['turn_id']}"
    deadline = time.monotonic() + 30
    while api.get(turn).json()["status"] != "failed":
        assert time.monotonic() < deadline, "the turn did not fail"
        time.sleep(0.1)
    detail = api.get(f"/api/v1/conversations/{cid}").json()
    assert detail["last_turn_status"] == "failed" and detail["title"] == "zebra crossing #fail"
    ops_page.goto(f"{server.url}/conversations?status=failed")
    row = ops_page.locator(f"#conversations tr[data-cid='{cid}']")
    expect(row.locator(".badge.status-failed")).to_have_text("failed")
    expect(row).to_contain_text("zebra crossing #fail")
    ops_page.goto(f"{server.url}/conversations?q=ZEBRA")
    expect(ops_page.locator("#conversations tbody tr")).to_have_count(1)
    ops_page.goto(f"{server.url}/conversations?status=idle")
    expect(ops_page.locator(f"#conversations tr[data-cid='{cid}']")).to_have_count(0)
    ops_page.goto(f"{server.url}/")
    expect(ops_page.locator("#home-failures")).to_contain_text("zebra crossing")


def test_destructive_actions_ask_first(
    ops_page: Page, api: httpx.Client, server: LiveServer
) -> None:
    items = [{"id": f"s{i}", "prompt": f"slow {i} #slow #long"} for i in range(3)]
    created = api.post("/api/v1/batches", json={"items": items, "config": {"max_concurrency": 1}})
    bid = created.json()["batch"]["id"]
    ops_page.goto(f"{server.url}/batches/{bid}")
    asked: list[str] = []

    def answer(accept: bool) -> Any:
        def handle(dialog: Dialog) -> None:
            asked.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        return handle

    ops_page.once("dialog", answer(False))
    ops_page.locator("#cancel-form button").click()
    expect(ops_page.locator("#batch-status")).to_have_text("running")
    assert asked == ["Cancel this batch? Its queued and running items stop."]
    assert api.get(f"/api/v1/batches/{bid}").json()["status"] == "running"
    ops_page.once("dialog", answer(True))
    ops_page.locator("#cancel-form button").click()
    expect(ops_page.locator(".flash-info")).to_contain_text("Batch cancelled")
    assert api.get(f"/api/v1/batches/{bid}").json()["status"] == "cancelled"

    cid, note = _ask(api, "1+1")
    ops_page.goto(f"{server.url}/conversations/{cid}")
    ops_page.once("dialog", answer(False))
    ops_page.locator("#close-form button").click()
    expect(ops_page.locator("#close-form")).to_be_visible()
    assert api.get(f"/api/v1/conversations/{cid}").json()["closed"] is False
    ops_page.goto(f"{server.url}/approvals?conversation_id={cid}")
    ops_page.locator("#inbox tbody input.pick").first.check()
    ops_page.fill("#selection-reason", "no")
    ops_page.once("dialog", answer(False))
    ops_page.locator("#deny-selected").click()
    expect(ops_page.locator("#inbox tbody tr")).to_have_count(1)
    assert asked[-1] == "Deny 1 selected request?\n1 calculator call (1 distinct: expression: 1+1)"
    ops_page.once("dialog", answer(False))
    ops_page.locator("#allow-selected").click()
    expect(ops_page.locator("#inbox tbody tr")).to_have_count(1)
    assert asked[-1] == (
        "Allow 1 selected request? They run now:\n1 calculator call (1 distinct: expression: 1+1)"
    )
    assert api.get(f"/api/v1/notifications/{note['id']}").json()["status"] == "pending"


def test_the_audit_log_filters_and_shows_edits_as_a_diff(
    ops_page: Page, api: httpx.Client, server: LiveServer
) -> None:
    _, edited = _ask(api, "3*3")
    _, denied = _ask(api, "4*4")
    store = server.services.notifications
    store.resolve(
        edited["id"], {"kind": "allow", "arguments": {"expression": "3*4"}}, actor="auditor-x"
    )
    store.resolve(denied["id"], {"kind": "deny", "reason": "no squares"}, actor="auditor-x")
    ops_page.goto(f"{server.url}/audit?actor=auditor-x&decision=allow")
    rows = ops_page.locator("#audit tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.locator(".diff-del")).to_contain_text('"expression": "3*3"')
    expect(rows.locator(".diff-add")).to_contain_text('"expression": "3*4"')
    ops_page.goto(f"{server.url}/audit?actor=auditor-x&decision=deny&tool=calculator")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("no squares")
    # The row names the request as the inbox does, its arguments folded: a line, not a block.
    expect(rows.locator(".audit-request a").first).to_have_text("calculator expression 4*4")
    expect(rows.locator("details.args-before pre")).to_be_hidden()
    height = rows.first.bounding_box()
    assert height is not None and height["height"] < 900 / 12, height
    ops_page.goto(f"{server.url}/audit?actor=nobody-at-all")
    expect(ops_page.locator("#audit-empty")).to_have_text("Nothing matches these filters.")
    listed = api.get("/api/v1/audit", params={"actor": "auditor-x", "decision": "deny"}).json()
    assert [e["reason"] for e in listed["items"]] == ["no squares"]


# Every control named, text at WCAG AA contrast; the elements that fail, for the message.
UNLABELLED = """() => Array.from(document.querySelectorAll(
  'input:not([type=hidden]), select, textarea, button')).filter((el) => {
    if (el.offsetParent === null) return false;
    const labels = el.labels ? Array.from(el.labels).map((l) => l.textContent.trim()) : [];
    const name = el.getAttribute('aria-label') || labels.join(' ')
      || (el.tagName === 'BUTTON' ? el.textContent.trim() : '');
    return !name;
  }).map((el) => el.outerHTML.slice(0, 120))"""

LOW_CONTRAST = """() => {
  const rgb = (css) => css.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => {
    v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  }).reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const background = (el) => {
    for (let node = el; node; node = node.parentElement) {
      const c = rgb(getComputedStyle(node).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const bad = [];
  for (const el of document.querySelectorAll('body *')) {
    const own = Array.from(el.childNodes).some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || el.offsetParent === null || el.closest('.visually-hidden, svg')) continue;
    const style = getComputedStyle(el);
    const a = lum(rgb(style.color)), b = lum(background(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const large = parseFloat(style.fontSize) >= 24
      || (parseFloat(style.fontSize) >= 18.6 && Number(style.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) bad.push(el.outerHTML.slice(0, 100) + ' ' + ratio.toFixed(2));
  }
  return bad;
}"""


def test_every_page_at_1280_and_390_px_is_labelled_readable_and_fits(
    browser: Browser, api: httpx.Client, server: LiveServer, batch_id: str
) -> None:
    cid, note = _ask(api, "5+5")
    pages = {
        "home": "/",
        "approvals": "/approvals",
        "approval": f"/approvals/{note['id']}",
        "conversations": "/conversations",
        "conversation": f"/conversations/{cid}",
        "batches": "/batches",
        "batch": f"/batches/{batch_id}",
        "audit": "/audit",
        "policy": "/policy",
        "usage": "/usage",
        "agents": "/agents",
        "webhooks": "/webhooks",
        "triggers": "/triggers",
    }
    for width in (1280, 390):
        with signed_in(browser, server, width=width, height=900) as tab:
            for name, path in pages.items():
                tab.goto(f"{server.url}{path}")
                shot(tab, f"page-{name}-{width}")
                assert tab.evaluate(UNLABELLED) == [], f"{name} at {width} px"
                assert tab.evaluate(LOW_CONTRAST) == [], f"{name} at {width} px"
                overflow = tab.evaluate("document.documentElement.scrollWidth")
                assert overflow <= width, f"{name} is {overflow} px wide at {width} px"
