"""Pure pieces of the web layer: stream id order, SSE frames, usage parsing, the chart."""

from __future__ import annotations

from datetime import date

import pytest

from shared.errors import InvalidInput
from shared.events import StatusEvent
from shared.steps import UsageMetadata
from webui.chart import usage_chart
from webui.sse import event_frame, is_after, parse_stream_id
from webui.usage_report import DayUsage, UsageReport, day_range, parse_day


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


def test_day_range_bounds() -> None:
    assert day_range(date(2024, 2, 28), date(2024, 3, 1))[1] == date(2024, 2, 29)
    with pytest.raises(InvalidInput):
        day_range(date(2024, 1, 2), date(2024, 1, 1))
    with pytest.raises(InvalidInput):
        day_range(date(2020, 1, 1), date(2024, 1, 1))


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
