"""Token usage by model and UTC day, from the ``usage_by_day`` hashes the worker writes.

Each day is a HASH whose fields are ``"<model>:<counter>"`` (the counters of
`UsageMetadata`). A model name may itself hold colons (``llama3:8b``), so the
counter is what follows the last one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import redis

from shared.models.steps import USAGE_FIELDS, UsageMetadata
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace

__all__ = [
    "EARLIEST_DAY",
    "MAX_DAYS",
    "DayUsage",
    "UsageReport",
    "covered_days",
    "parse_day",
    "read_usage_report",
]

MAX_DAYS = 366
EARLIEST_DAY = date(2000, 1, 1)  # no usage is older


@dataclass(frozen=True)
class DayUsage:
    day: date
    models: dict[str, UsageMetadata]


@dataclass(frozen=True)
class UsageReport:
    start: date
    end: date
    days: list[DayUsage] = field(default_factory=list)

    @property
    def models(self) -> list[str]:
        return sorted({model for day in self.days for model in day.models})

    @property
    def totals(self) -> dict[str, UsageMetadata]:
        totals: dict[str, UsageMetadata] = {}
        for day in self.days:
            for model, usage in day.models.items():
                totals[model] = totals.get(model, UsageMetadata()) + usage
        return dict(sorted(totals.items()))


def covered_days(start: date, end: date, *, today: date) -> list[date]:
    """The days of ``start..end`` (inclusive) a report reads: the last MAX_DAYS of them that
    can hold usage (EARLIEST_DAY to `today`); no days when `end` is before `start`.
    """
    first, last = max(start, EARLIEST_DAY), min(end, today)
    if last < first:
        return []
    first = max(first, last - timedelta(days=MAX_DAYS - 1))
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def parse_day(fields: dict[str, str]) -> dict[str, UsageMetadata]:
    """The models of one day's hash, with their counters; unknown counters are ignored."""
    counts: dict[str, dict[str, int]] = {}
    for name, value in fields.items():
        model, _, counter = name.rpartition(":")
        if model and counter in USAGE_FIELDS:
            counts.setdefault(model, {})[counter] = int(value)
    return {model: UsageMetadata(**counters) for model, counters in sorted(counts.items())}


def read_usage_report(
    client: redis.Redis, keys: KeySpace, *, start: date, end: date, today: date | None = None
) -> UsageReport:
    """One pipelined HGETALL per covered day of the range (`today` is UTC's by default)."""
    days = covered_days(start, end, today=today or datetime.now(UTC).date())
    with storage_errors("reading usage by day"), client.pipeline(transaction=False) as pipe:
        for day in days:
            pipe.hgetall(keys.usage_by_day(day.isoformat()))
        raw_days = pipe.execute()
    return UsageReport(
        start=start,
        end=end,
        days=[DayUsage(day, parse_day(raw)) for day, raw in zip(days, raw_days, strict=True)],
    )
