"""Token usage by model and UTC day, from the ``usage_by_day`` hashes the worker writes.

Each day is a HASH whose fields are ``"<model>:<counter>"`` (the counters of
`UsageMetadata`). A model name may itself hold colons (``llama3:8b``), so the
counter is what follows the last one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

import redis

from shared.errors import InvalidInput
from shared.keys import KeySpace
from shared.redis_client import storage_errors
from shared.steps import USAGE_FIELDS, UsageMetadata

__all__ = [
    "EARLIEST_DAY",
    "MAX_DAYS",
    "DayUsage",
    "UsageReport",
    "day_range",
    "parse_day",
    "read_usage_report",
]

MAX_DAYS = 366
EARLIEST_DAY = date(2000, 1, 1)  # no usage is older; earlier dates are typos (or probes)


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


def day_range(start: date, end: date) -> list[date]:
    """Every day from `start` to `end` inclusive, bounded to MAX_DAYS."""
    if end < start:
        raise InvalidInput(f"start {start} is after end {end}")
    count = (end - start).days + 1
    if count > MAX_DAYS:
        raise InvalidInput(f"a usage report covers at most {MAX_DAYS} days; asked for {count}")
    return [start + timedelta(days=i) for i in range(count)]


def parse_day(fields: dict[str, str]) -> dict[str, UsageMetadata]:
    """The models of one day's hash, with their counters; unknown counters are ignored."""
    counts: dict[str, dict[str, int]] = {}
    for name, value in fields.items():
        model, _, counter = name.rpartition(":")
        if model and counter in USAGE_FIELDS:
            counts.setdefault(model, {})[counter] = int(value)
    return {model: UsageMetadata(**counters) for model, counters in sorted(counts.items())}


def read_usage_report(
    client: redis.Redis, keys: KeySpace, *, start: date, end: date
) -> UsageReport:
    """One pipelined HGETALL per day of the range."""
    days = day_range(start, end)
    with storage_errors("reading usage by day"), client.pipeline(transaction=False) as pipe:
        for day in days:
            pipe.hgetall(keys.usage_by_day(day.isoformat()))
        raw_days = pipe.execute()
    return UsageReport(
        start=start,
        end=end,
        days=[DayUsage(day, parse_day(raw)) for day, raw in zip(days, raw_days, strict=True)],
    )
