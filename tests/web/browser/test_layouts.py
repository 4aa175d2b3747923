"""Layouts at 1280x900 and 390 px in headless Chromium: the inbox's density, the request page's
decision and context above the fold, the batch's state table with its headers at 390 px and
in agreement with the legend. Measures go to test-artifacts/layout.txt."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from shared.models.notifications import NotificationStatus
from tests.web.browser.kit import ARTIFACTS, LiveServer, shot, signed_in

pytestmark = pytest.mark.browser

ASKING = 16
MEASURES: dict[str, Any] = {}


@pytest.fixture(scope="module")
def batch(api: httpx.Client, server: LiveServer) -> Iterator[str]:
    """A batch of `ASKING` calculator calls waiting for a person, and one plain item."""
    items: list[dict[str, Any]] = [
        {"id": f"row-{i:02d}", "prompt": f'call calculator {{"expression": "{i}*3"}}'}
        for i in range(ASKING)
    ]
    items.append({"id": "plain", "prompt": "hello"})
    config = {"conversation": {"tools": {"calculator": "ask"}}, "max_concurrency": 20}
    created = api.post("/api/v1/batches", json={"items": items, "config": config})
    assert created.status_code == 201, created.text
    bid = str(created.json()["batch"]["id"])
    deadline = time.monotonic() + 60
    while server.services.notifications.count_pending(batch_id=bid) < ASKING:
        assert time.monotonic() < deadline, "the batch's calls did not all park"
        time.sleep(0.2)
    yield bid
    (ARTIFACTS / "layout.txt").write_text(
        "".join(f"{name}: {value}\n" for name, value in sorted(MEASURES.items()))
    )


def _box(page: Page, selector: str) -> dict[str, float]:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not shown"
    return box


def test_the_inbox_shows_a_row_per_request_twelve_or_more_to_a_1280_screen(
    browser: Browser, server: LiveServer, batch: str
) -> None:
    with signed_in(browser, server, width=1280, height=900) as page:
        page.goto(f"{server.url}/approvals?batch_id={batch}")
        rows = page.locator("#inbox tbody tr")
        expect(rows).to_have_count(ASKING)
        boxes = [row.bounding_box() for row in rows.all()]
        seen = sum(1 for box in boxes if box is not None and box["y"] + box["height"] <= 900)
        MEASURES["inbox rows on a 1280x900 screen"] = seen
        MEASURES["inbox row height at 1280 px"] = round(boxes[0]["height"]) if boxes[0] else None
        shot(page, "layout-inbox-1280")
        assert seen >= 12, f"{seen} rows on the first screen"
        first = rows.first
        title, summary = (
            first.locator("a.title").bounding_box(),
            first.locator(".summary").bounding_box(),
        )
        assert title is not None and summary is not None
        assert summary["y"] >= title["y"] + title["height"] - 1  # arguments on a second line
        assert first.locator("a.title").inner_text().startswith("calculator expression ")


def test_the_inbox_at_390_px_starts_its_rows_early_and_fits(
    browser: Browser, server: LiveServer, batch: str
) -> None:
    with signed_in(browser, server, width=390, height=844) as page:
        page.goto(f"{server.url}/approvals?batch_id={batch}")
        top = _box(page, "#inbox tbody tr")["y"]
        MEASURES["first inbox row at 390 px, px down"] = round(top)
        shot(page, "layout-inbox-390")
        assert top <= 500, f"the first row is {top} px down"
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        allow = _box(page, "#inbox tbody tr button.allow")
        assert allow["x"] + allow["width"] <= 390


def test_the_request_page_puts_decision_and_context_above_the_fold(
    browser: Browser, server: LiveServer, batch: str
) -> None:
    note = server.services.notifications.pending(batch_id=batch, limit=1)[0]
    with signed_in(browser, server, width=1280, height=900) as page:
        page.goto(f"{server.url}/approvals/{note.id}?batch_id={batch}")
        deny, allow = _box(page, "#deny-next"), _box(page, "#allow-next")
        context = _box(page, "#context")
        MEASURES["request page: Allow and next, bottom px"] = round(allow["y"] + allow["height"])
        MEASURES["request page: the context starts, px down"] = round(context["y"])
        shot(page, "layout-request-1280")
        assert max(allow["y"] + allow["height"], deny["y"] + deny["height"]) <= 900
        assert context["y"] < 900
        label = _box(page, "label[for=arguments]")
        assert label["height"] < 30, "the arguments' label wraps"


def test_the_batch_table_keeps_its_headers_at_390_px_and_agrees_with_the_legend(
    browser: Browser, server: LiveServer, batch: str
) -> None:
    store = server.services.notifications
    notes = store.pending(batch_id=batch, limit=ASKING)
    store.resolve(notes[0].id, {"kind": "deny", "reason": "not this one"}, actor="layout")
    for note in notes[1:]:
        store.resolve(note.id, {"kind": "allow"}, actor="layout")
    assert all(store.get(n.id).status is NotificationStatus.RESOLVED for n in notes)
    for width in (1280, 390):
        with signed_in(browser, server, width=width, height=900) as page:
            page.goto(f"{server.url}/batches/{batch}")
            expect(page.locator("#batch-status")).to_have_text("done", timeout=60_000)
            expect(page.locator("#batch-counts td[data-state=denied]")).to_have_text("1")
            legend = {
                link.get_attribute("data-state"): link.inner_text().split()[-1]
                for link in page.locator("#batch-bar ul.legend-list a").all()
            }
            assert legend == {"done": str(ASKING), "denied": "1"}, legend
            for state, count in legend.items():
                expect(page.locator(f"#batch-counts td[data-state={state}]")).to_have_text(count)
            for header in page.locator("#batch-counts th").all():
                state = header.inner_text()
                head, cell = (
                    header.bounding_box(),
                    page.locator(f"#batch-counts td[data-state={state}]").bounding_box(),
                )
                assert head is not None and cell is not None and head["width"] > 10, state
                assert head["x"] + head["width"] <= width and cell["x"] + cell["width"] <= width
                if width == 390:  # one state a row: its name beside its count
                    assert abs(head["y"] - cell["y"]) < 3 and head["x"] < cell["x"], state
                else:  # a row of names over a row of counts
                    assert abs(head["x"] - cell["x"]) < 3 and head["y"] < cell["y"], state
            shot(page, f"layout-batch-{width}")
            assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_usage_page_at_390_px_shows_its_newest_bar_and_labels_its_numbers(
    browser: Browser, server: LiveServer, batch: str
) -> None:
    """The batch's calls are today's usage: the chart's rightmost bar, and the tables' rows."""
    with signed_in(browser, server, width=390, height=900) as page:
        page.goto(f"{server.url}/usage")
        figure = _box(page, "#usage-figure")
        bar = page.locator("#usage-chart rect.bar").last.bounding_box()
        assert bar is not None
        assert figure["x"] <= bar["x"] and bar["x"] + bar["width"] <= figure["x"] + figure["width"]
        total = page.locator("#usage-totals tbody tr").first.locator("td[data-label=Total]")
        label = total.evaluate("td => getComputedStyle(td, '::before').content")
        assert label == '"Total: "', label
        day = page.locator("#usage-days tbody tr").last.locator("td").nth(1)
        assert day.evaluate("td => getComputedStyle(td, '::before').content") == '"Total tokens: "'
        shot(page, "layout-usage-390")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390


@pytest.mark.parametrize(
    ("path", "form"),
    [("/agents", "#new-agent"), ("/agents", "#new-schedule"), ("/triggers", "#new-trigger")],
)
def test_a_create_form_at_390_px_puts_each_name_over_its_own_box(
    browser: Browser, server: LiveServer, path: str, form: str
) -> None:
    with signed_in(browser, server, width=390, height=900) as page:
        page.goto(f"{server.url}{path}")
        labels = page.locator(f"{form} label").all()
        assert len(labels) >= 3
        for label in labels:
            box = label.bounding_box()
            control = label.locator("input, select, textarea").first.bounding_box()
            assert box is not None and control is not None
            name = label.inner_text().strip().splitlines()[0] if label.inner_text() else "?"
            # the name on its own line above the box, the box inside the label, on the screen
            assert control["y"] >= box["y"] + 10, name
            assert box["x"] - 1 <= control["x"] and control["x"] + control["width"] <= 390, name
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        shot(page, f"layout-form-{form.strip('#')}-390")
