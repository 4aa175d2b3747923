"""Pure pieces of the web layer: stream id order, SSE frames, usage parsing, the chart."""

from __future__ import annotations

from datetime import date

import pytest

from shared.errors import InvalidInput
from shared.models.events import StatusEvent
from shared.models.steps import UsageMetadata
from shared.usage_report import (
    EARLIEST_DAY,
    MAX_DAYS,
    DayUsage,
    UsageReport,
    covered_days,
    parse_day,
)
from webui.chart import usage_chart
from webui.live.frames import event_frame
from webui.stream_ids import is_after, parse_stream_id


def test_stream_ids_compare_as_numbers() -> None:
    assert is_after("10-0", "9-5")  # as text, "10-0" < "9-5"
    assert is_after("5-10", "5-9")
    assert not is_after("5-9", "5-9")
    assert parse_stream_id("0") == (0, 0)
    with pytest.raises(InvalidInput):
        parse_stream_id("5")


def test_event_frame() -> None:
    event = StatusEvent(id="1-2", conversation_id="c", status="idle")
    assert event_frame(event) == (
        'id: 1-2\nevent: status\ndata: {"id":"1-2","conversation_id":"c","turn_id":"",'
        '"kind":"status","status":"idle"}\n\n'
    )


def test_parse_day_splits_on_the_last_colon() -> None:
    parsed = parse_day(
        {"a:b:c:total_token_count": "3", "m:prompt_token_count": "1", "m:bogus": "9", "x": "1"}
    )
    assert parsed == {
        "a:b:c": UsageMetadata(total_token_count=3),
        "m": UsageMetadata(prompt_token_count=1),
    }


def test_covered_days() -> None:
    today = date(2025, 6, 30)
    assert covered_days(date(2024, 2, 28), date(2024, 3, 1), today=today)[1] == date(2024, 2, 29)
    assert covered_days(date(2024, 1, 2), date(2024, 1, 1), today=today) == []  # end before start
    long = covered_days(date(2020, 1, 1), date(2024, 1, 1), today=today)
    assert len(long) == MAX_DAYS and long[-1] == date(2024, 1, 1)  # the last MAX_DAYS days
    future = covered_days(date(2025, 6, 20), date(9999, 12, 31), today=today)
    assert (future[0], future[-1]) == (date(2025, 6, 20), today)
    assert covered_days(date(2026, 1, 1), date(2026, 2, 1), today=today) == []
    past = covered_days(date.min, date(2000, 1, 3), today=today)
    assert past == [EARLIEST_DAY, date(2000, 1, 2), date(2000, 1, 3)]
    assert covered_days(date.min, date(1999, 12, 31), today=today) == []


def test_chart_stacks_models_per_day() -> None:
    report = UsageReport(
        start=date(2025, 1, 1),
        end=date(2025, 1, 2),
        days=[
            DayUsage(
                date(2025, 1, 1),
                {
                    "a": UsageMetadata(total_token_count=60),
                    "b": UsageMetadata(total_token_count=40),
                },
            ),
            DayUsage(date(2025, 1, 2), {}),
        ],
    )
    chart = usage_chart(report, width=264, height=148)  # a 188 x 100 plot
    first, second = chart.bars
    assert first.height == pytest.approx(60) and second.height == pytest.approx(40)
    assert second.y + second.height == pytest.approx(first.y)  # stacked
    assert first.y + first.height == pytest.approx(chart.plot_bottom)
    assert [t.label for t in chart.y_ticks][-1] == "100"
    assert chart.legend == [("a", "#3465a4"), ("b", "#f57900")]
    assert [t.label for t in chart.x_ticks] == ["01-01", "01-02"]


def test_webui_declares_its_public_names() -> None:
    import importlib
    import pkgutil

    import webui

    names = [
        info.name
        for info in pkgutil.walk_packages(webui.__path__, "webui.")
        if info.name != "webui.wsgi"  # builds an app when imported, for gunicorn only
    ]
    assert len(names) > 20
    for name in ["webui", *names]:
        module = importlib.import_module(name)
        declared = getattr(module, "__all__", None)
        assert declared, f"{name} declares no __all__"
        assert [n for n in declared if not hasattr(module, n)] == [], name


def test_inbox_filter_reads_queries_and_forms() -> None:
    from webui.approvals.inbox import InboxFilter
    from webui.errors import HttpProblem

    parsed = InboxFilter.of({"tool": " send_email ", "batch": "b1", "min_age_s": "600"})
    assert parsed == InboxFilter(tool="send_email", batch_id="b1", min_age_s=600.0)
    assert parsed.facets == 2
    assert parsed.query() == {"tool": "send_email", "batch_id": "b1", "min_age_s": "600"}
    assert parsed.describe() == "tool send_email, batch b1, waiting at least 600 s"
    assert InboxFilter.of({"batch_id": "b2", "batch": "b1"}).batch_id == "b2"
    assert InboxFilter.of({"min_age_s": "1.5"}).query() == {"min_age_s": "1.5"}
    assert InboxFilter.of({}).describe() == "every pending notification"
    for bad in ("-1", "soon", "nan", "inf"):
        with pytest.raises(HttpProblem) as raised:
            InboxFilter.of({"min_age_s": bad})
        assert raised.value.status == 400


def test_a_query_model_reads_what_its_document_declares() -> None:
    from werkzeug.datastructures import MultiDict

    from webui.errors import HttpProblem
    from webui.queries import ConversationsQuery, EventsQuery, FileQuery, RuleScopeQuery

    repeated = MultiDict([("limit", ""), ("offset", "5"), ("offset", "x"), ("other", "y")])
    assert ConversationsQuery.of(repeated) == ConversationsQuery(offset=5, limit=50)
    names = [p["name"] for p in ConversationsQuery.parameters()]
    assert names == ["offset", "limit", "status", "q"]
    assert EventsQuery.of({"last_event_id": "0"}, headers={"Last-Event-ID": ""}).after == "0-0"
    refusals = {
        "query parameter 'limit' must be an integer from 1 to 200, got '0'": (
            ConversationsQuery,
            {"limit": "0"},
        ),
        "query parameter 'path' is required": (FileQuery, {"path": ""}),
        "query parameter 'batch_id' has a bad value, got ''": (RuleScopeQuery, {"batch_id": ""}),
    }
    for message, (model, query) in refusals.items():
        with pytest.raises(HttpProblem) as raised:
            model.of(query)
        assert (raised.value.status, raised.value.message) == (400, message)


def test_bulk_scope_pins_the_earlier_cutoff_and_summarises() -> None:
    import time

    from shared.models.notifications import Allow, Deny, Submit
    from shared.store.bulk import BulkOutcome, BulkScope, check_decision
    from webui.approvals.inbox import InboxFilter

    before = time.time()
    aged = BulkScope.pin(InboxFilter(min_age_s=60))
    assert before - 61 < aged.created_before <= time.time() - 60
    assert BulkScope.pin(InboxFilter(), created_before=5.0).created_before == 5.0
    assert BulkScope.pin(InboxFilter(min_age_s=60), created_before=1e12).created_before < 1e12
    assert check_decision(Deny(reason="no")).kind == "deny"
    for refused in (Allow(arguments={"x": 1}), Submit(content=1)):
        with pytest.raises(InvalidInput):
            check_decision(refused)
    outcome = BulkOutcome(matched=5, resolved=2, conflicts=1, not_applicable=1, left_pending=1)
    assert outcome.summary("Allowed") == (
        "Allowed 2 of 5; 1 already resolved by someone else; "
        "1 skipped: allowed is not possible for them; 1 left pending: they moved while the list "
        "was read."
    )
    assert BulkOutcome(matched=3, resolved=3).summary("Denied") == "Denied 3 of 3."


def test_batch_items_are_checked_one_by_one() -> None:
    from shared.settings import Settings
    from webui.batches.input import batch_lines

    settings = Settings(max_prompt_text_bytes=20)
    items = [
        {"id": 7, "prompt": "seven"},
        {"id": "", "prompt": "blank id"},
        {"prompt": {"parts": [{"kind": "nope"}]}},
        {"prompt": "x" * 30},
        {"id": "7", "prompt": "again"},
    ]
    lines = list(batch_lines(items, settings))
    assert [(line.line, line.id) for line in lines] == [
        (0, "7"),
        (1, "item-1"),
        (2, "item-2"),
        (3, "item-3"),
        (4, "item-4"),
    ]
    assert lines[0].prompt is not None and not lines[0].error
    assert "'id' must be a string of 1-200 characters" in lines[1].error
    assert lines[2].error.startswith("items[2]: prompt.parts.0")
    assert lines[3].error.startswith("items[3]: ") and "20" in lines[3].error
    assert lines[4].error == "items[4]: duplicate id '7'"
