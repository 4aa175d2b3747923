"""Token usage and cost by model, agent, batch, owner and UTC day, from the ``usage_by_day``
hashes the worker's flush writes.

Each day is a HASH whose fields are ``"<model>:<counter>"`` (the counters of
`UsageMetadata`, cost included), and ``"@agent:<name>:<counter>"``,
``"@batch:<id>:<counter>"`` and ``"@owner:<name>:<counter>"`` for the same calls by
agent, batch and submitting owner (the identity: a user or an API token). A model name
may itself hold colons (``llama3:8b``), so the counter is what follows the last one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from enum import Enum

import redis

from shared.models.steps import USAGE_FIELDS, UsageMetadata
from shared.spreadsheet import safe_cell
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace

__all__ = [
    "EARLIEST_DAY",
    "MAX_DAYS",
    "DayUsage",
    "UsageKind",
    "UsageReport",
    "covered_days",
    "parse_day",
    "read_usage_report",
    "usage_csv",
]

MAX_DAYS = 366
EARLIEST_DAY = date(2000, 1, 1)  # no usage is older


class UsageKind(str, Enum):
    """What usage is broken down by; each call counts once in each."""

    DAY = "day"
    MODEL = "model"
    AGENT = "agent"
    BATCH = "batch"
    OWNER = "owner"  # the identity that submitted it: a user or an API token


@dataclass(frozen=True)
class DayUsage:
    day: date
    models: dict[str, UsageMetadata]
    scopes: dict[str, UsageMetadata] = field(default_factory=dict)  # "agent:x", "batch:b"...

    @property
    def total(self) -> UsageMetadata:
        """Every call of the day (each is counted under exactly one model)."""
        return sum(self.models.values(), UsageMetadata())

    def by(self, kind: UsageKind) -> dict[str, UsageMetadata]:
        """The day's usage by `kind`: name -> usage (for DAY, the day itself)."""
        if kind is UsageKind.MODEL:
            return self.models
        if kind is UsageKind.DAY:
            return {self.day.isoformat(): self.total} if self.models else {}
        prefix = f"{kind.value}:"
        return {n.removeprefix(prefix): u for n, u in self.scopes.items() if n.startswith(prefix)}


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
        return self.by(UsageKind.MODEL)

    @property
    def scope_totals(self) -> dict[str, UsageMetadata]:
        """By agent (``agent:<name>``), batch (``batch:<id>``) and owner (``owner:<name>``)."""
        return _summed(day.scopes for day in self.days)

    def by(self, kind: UsageKind) -> dict[str, UsageMetadata]:
        """Over the range, by `kind`: name -> usage, sorted by name (days in order)."""
        return _summed(day.by(kind) for day in self.days)


def _summed(maps: Iterable[dict[str, UsageMetadata]]) -> dict[str, UsageMetadata]:
    totals: dict[str, UsageMetadata] = {}
    for found in maps:
        for name, usage in found.items():
            totals[name] = totals.get(name, UsageMetadata()) + usage
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


def parse_day(fields: dict[str, str], *, scopes: bool = False) -> dict[str, UsageMetadata]:
    """The models of one day's hash (or, with `scopes`, its agents and owners, without the
    "@"), with their counters; unknown counters are ignored."""
    counts: dict[str, dict[str, int]] = {}
    for name, value in fields.items():
        model, _, counter = name.rpartition(":")
        if model and model.startswith("@") == scopes and counter in USAGE_FIELDS:
            counts.setdefault(model.removeprefix("@"), {})[counter] = int(value)
    return {model: UsageMetadata(**counters) for model, counters in sorted(counts.items())}


def _across_shards(shards: list[dict[str, str]]) -> dict[str, str]:
    """One day's usage hash from its shards' copies (counters add up)."""
    if len(shards) == 1:
        return shards[0]
    total: dict[str, int] = {}
    for raw in shards:
        for name, value in raw.items():
            total[name] = total.get(name, 0) + int(value)
    return {name: str(value) for name, value in total.items()}


def read_usage_report(
    client: redis.Redis, keys: KeySpace, *, start: date, end: date, today: date | None = None
) -> UsageReport:
    """One pipelined HGETALL per covered day of the range (`today` is UTC's by default)."""
    days = covered_days(start, end, today=today or datetime.now(UTC).date())
    with storage_errors("reading usage by day"), client.pipeline(transaction=False) as pipe:
        for day in days:
            for shard in keys.all_shards():
                pipe.hgetall(keys.usage_by_day(day.isoformat(), shard))
        replies = pipe.execute()
    step = keys.shards
    raw_days = [_across_shards(replies[n : n + step]) for n in range(0, len(replies), step)]
    return UsageReport(
        start=start,
        end=end,
        days=[
            DayUsage(day, parse_day(raw), parse_day(raw, scopes=True))
            for day, raw in zip(days, raw_days, strict=True)
        ],
    )


# The CSV's columns after day, kind and name: each counter of `UsageMetadata`, cost last.
CSV_COUNTERS = (
    "prompt_token_count",
    "candidates_token_count",
    "thoughts_token_count",
    "cached_content_token_count",
    "total_token_count",
    "unpriced_calls",
    "estimated_calls",
)


def usage_csv(report: UsageReport, kinds: Sequence[UsageKind] = tuple(UsageKind)) -> str:
    """A row per day and name of each kind (a `day` row is the day's total); the cost is blank,
    not 0, for calls without a price, and names are cells no spreadsheet runs as formulas."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["day", "kind", "name", *CSV_COUNTERS, "cost"])
    for day in report.days:
        for kind in kinds:
            for name, usage in day.by(kind).items():
                priced = usage.cost_micros or not usage.unpriced_calls
                cost = f"{usage.cost_micros / 1_000_000:.6f}" if priced else ""
                counters = [getattr(usage, counter) for counter in CSV_COUNTERS]
                row = [day.day.isoformat(), kind.value, safe_cell(name), *counters, cost]
                writer.writerow(row)
    return out.getvalue()
