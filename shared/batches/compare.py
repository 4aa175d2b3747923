"""Two runs of the same inputs, item by item: outcomes, a word-level diff of the answers,
structured output field by field, tool calls, duration, tokens and cost; and the tally of a
whole comparison (counts by outcome, each field's agreement rate). Pure: results in,
comparisons out.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from shared.batches.export import Records, flatten
from shared.models.batches import BatchState, CompareOutcome
from shared.spreadsheet import cell

__all__ = [
    "COMPARE_CSV",
    "MAX_DIFF_WORDS",
    "Tally",
    "WordDiff",
    "compare_csv_lines",
    "compare_pair",
    "succeeded",
    "word_diff",
]

MAX_DIFF_WORDS = 5_000  # of each answer; a longer one is diffed up to there (`truncated`)
MAX_FIELDS = 200  # tallied; more are compared item by item but not rated

Result = dict[str, Any]
_OUTCOMES = [outcome.value for outcome in CompareOutcome]
COMPARE_CSV = (
    "id",
    "line",
    "outcome",
    "first_status",
    "second_status",
    "first_answer",
    "second_answer",
    "fields_differing",
    "first_tokens",
    "second_tokens",
    "first_cost",
    "second_cost",
    "first_tool_calls",
    "second_tool_calls",
    "first_duration_s",
    "second_duration_s",
    "first_error",
    "second_error",
)


def succeeded(result: Result) -> bool:
    """Ended `done` with no tool call denied: what the run was asked for."""
    return result.get("status") == BatchState.DONE.value and not result.get("denied")


def compare_pair(first: Result, second: Result) -> dict[str, Any]:
    """One item's comparison, JSON-ready: both sides, the outcome, and what differs."""
    fields = _fields(first.get("structured_output"), second.get("structured_output"))
    diff = word_diff(first.get("text") or "", second.get("text") or "")
    return {
        "id": first["id"],
        "line": first["line"],
        "outcome": _outcome(first, second).value,
        "first": _side(first),
        "second": _side(second),
        "answer_diff": diff.segments,
        "answer_diff_truncated": diff.truncated,
        "fields": fields,
    }


@dataclass(frozen=True)
class WordDiff:
    segments: list[list[str]]  # ["=", text] kept, ["-", text] only first's, ["+", text] second's
    truncated: bool


def word_diff(first: str, second: str) -> WordDiff:
    """The answers' words, kept, removed and added, in order (whitespace as one space)."""
    a, b = first.split(), second.split()
    truncated = len(a) > MAX_DIFF_WORDS or len(b) > MAX_DIFF_WORDS
    a, b = a[:MAX_DIFF_WORDS], b[:MAX_DIFF_WORDS]
    segments: list[list[str]] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            segments.append(["=", " ".join(a[i1:i2])])
            continue
        if i2 > i1:
            segments.append(["-", " ".join(a[i1:i2])])
        if j2 > j1:
            segments.append(["+", " ".join(b[j1:j2])])
    return WordDiff(segments, truncated)


@dataclass
class Tally:
    """A comparison's summary, kept as items go by (memory: one counter per field)."""

    total: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_OUTCOMES, 0))
    fields: dict[str, list[int]] = field(default_factory=dict)  # path -> [agree, compared]
    tokens: list[int] = field(default_factory=lambda: [0, 0])
    cost_micros: list[int] = field(default_factory=lambda: [0, 0])

    def add(self, compared: dict[str, Any]) -> None:
        self.total += 1
        self.outcomes[compared["outcome"]] += 1
        for n, side in enumerate((compared["first"], compared["second"])):
            self.tokens[n] += side["tokens"] or 0
            self.cost_micros[n] += side["cost_micros"] or 0
        if compared["outcome"] in (CompareOutcome.AGREE.value, CompareOutcome.DIFFER.value):
            for found in compared["fields"]:
                counts = self.fields.get(found["field"])
                if counts is None and len(self.fields) >= MAX_FIELDS:
                    continue
                counts = self.fields.setdefault(found["field"], [0, 0])
                counts[0] += found["agree"]
                counts[1] += 1

    def summary(self) -> dict[str, Any]:
        rates = {
            path: {"agree": agree, "compared": compared, "rate": round(agree / compared, 4)}
            for path, (agree, compared) in sorted(self.fields.items())
        }
        return {
            "total": self.total,
            "outcomes": self.outcomes,
            "fields": rates,
            "tokens": {"first": self.tokens[0], "second": self.tokens[1]},
            "cost_micros": {"first": self.cost_micros[0], "second": self.cost_micros[1]},
        }


def compare_csv_lines(comparisons: Iterable[dict[str, Any]]) -> Iterator[str]:
    """A header, then a record per item; text cells safe to open in a spreadsheet."""
    records = Records()
    yield records.line(list(COMPARE_CSV))
    for compared in comparisons:
        first, second = compared["first"], compared["second"]
        differing = [f["field"] for f in compared["fields"] if not f["agree"]]
        row = [
            compared["id"],
            compared["line"],
            compared["outcome"],
            first["status"],
            second["status"],
            first["answer"],
            second["answer"],
            " ".join(differing),
            first["tokens"],
            second["tokens"],
            _cost(first),
            _cost(second),
            _names(first["tool_calls"]),
            _names(second["tool_calls"]),
            first["duration_s"],
            second["duration_s"],
            first["error"],
            second["error"],
        ]
        yield records.line([cell(value) for value in row])


def _outcome(first: Result, second: Result) -> CompareOutcome:
    ok = succeeded(first), succeeded(second)
    if ok == (True, True):
        return CompareOutcome.AGREE if _same_answer(first, second) else CompareOutcome.DIFFER
    if ok == (True, False):
        return CompareOutcome.ONLY_FIRST
    if ok == (False, True):
        return CompareOutcome.ONLY_SECOND
    return CompareOutcome.NEITHER


def _same_answer(first: Result, second: Result) -> bool:
    a, b = first.get("structured_output"), second.get("structured_output")
    if a is not None or b is not None:
        return _canonical(a) == _canonical(b)
    return (first.get("text") or "").split() == (second.get("text") or "").split()


def _fields(first: Any, second: Any) -> list[dict[str, Any]]:
    """Each flattened field of either structured output, with both values and whether equal."""
    if not isinstance(first, dict) and not isinstance(second, dict):
        return []
    a = flatten(first) if isinstance(first, dict) else {}
    b = flatten(second) if isinstance(second, dict) else {}
    paths = list(dict.fromkeys([*a, *b]))
    return [
        {
            "field": p,
            "first": a.get(p),
            "second": b.get(p),
            "agree": _canonical(a.get(p)) == _canonical(b.get(p)) and (p in a) == (p in b),
        }
        for p in paths
    ]


def _side(result: Result) -> dict[str, Any]:
    usage = result.get("usage") or {}
    shown = "denied" if result.get("status") == "done" and result.get("denied") else None
    return {
        "status": shown or result.get("status"),
        "answer": result.get("text"),
        "structured_output": result.get("structured_output"),
        "tokens": usage.get("total_token_count"),
        "cost_micros": usage.get("cost_micros"),
        "priced": bool(usage)
        and not (usage.get("unpriced_calls") and not usage.get("cost_micros")),
        "error": result.get("error"),
        "denials": result.get("denials") or [],
        "attempts": result.get("attempts", 1),
        "conversation_id": result.get("conversation_id"),
        "tool_calls": result.get("tool_calls"),
        "duration_s": result.get("duration_s"),
    }


def _cost(side: dict[str, Any]) -> str:
    return f"{(side['cost_micros'] or 0) / 1_000_000:.6f}" if side["priced"] else ""


def _names(tool_calls: list[str] | None) -> str:
    return " ".join(tool_calls) if tool_calls else ""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
