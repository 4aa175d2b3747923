"""A stacked bar chart of tokens by model and day, as geometry for an inline SVG. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from shared.usage_report import DayUsage, UsageReport

__all__ = ["Bar", "Chart", "Tick", "usage_chart"]

PALETTE = ("#3465a4", "#f57900", "#4e9a06", "#cc0000", "#75507b", "#c4a000", "#06989a", "#555753")
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 12, 12, 36
_Y_FRACTIONS = (0, 0.2, 0.4, 0.6, 0.8, 1)


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    color: str
    label: str  # the tooltip: day, model and tokens


@dataclass(frozen=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    plot_left: int
    plot_bottom: int
    bars: list[Bar]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    legend: list[tuple[str, str]]  # (model, color)


def _nice_max(value: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten at or above `value` (at least 10)."""
    scale = 1
    while True:
        for step in (1, 2, 5):
            if step * scale >= max(value, 10):
                return step * scale
        scale *= 10


def _short(tokens: int) -> str:
    for size, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if tokens >= size:
            return f"{tokens / size:g}{suffix}"
    return str(tokens)


@dataclass(frozen=True)
class _Plot:
    """The drawing area: where a day's slot starts, and pixels per token."""

    left: float
    bottom: float
    slot: float
    scale: float


def _day_bars(plot: _Plot, i: int, day: DayUsage, colors: dict[str, str]) -> list[Bar]:
    x, base, bars = plot.left + (i + 0.15) * plot.slot, plot.bottom, []
    for model, usage in day.models.items():
        height = usage.total_token_count * plot.scale
        if height <= 0:
            continue
        base -= height
        label = f"{day.day.isoformat()} {model}: {usage.total_token_count} tokens"
        bars.append(Bar(x, base, plot.slot * 0.7, height, colors[model], label))
    return bars


def _day_total(day: DayUsage) -> int:
    return sum(usage.total_token_count for usage in day.models.values())


def usage_chart(report: UsageReport, *, width: int = 760, height: int = 260) -> Chart:
    """Total tokens per day, one stacked segment per model."""
    colors = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(report.models)}
    top = _nice_max(max((_day_total(day) for day in report.days), default=0))
    plot_h = height - _TOP - _BOTTOM
    days = max(len(report.days), 1)
    plot = _Plot(_LEFT, _TOP + plot_h, (width - _LEFT - _RIGHT) / days, plot_h / top)
    bars = [bar for i, day in enumerate(report.days) for bar in _day_bars(plot, i, day, colors)]
    every = max(days // 10, 1)
    x_ticks = [
        Tick(plot.left + (i + 0.5) * plot.slot, day.day.strftime("%m-%d"))
        for i, day in enumerate(report.days)
        if i % every == 0
    ]
    y_ticks = [Tick(plot.bottom - plot_h * f, _short(round(top * f))) for f in _Y_FRACTIONS]
    return Chart(width, height, _LEFT, _TOP + plot_h, bars, x_ticks, y_ticks, list(colors.items()))
