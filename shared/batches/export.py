"""A batch's results as a file: JSON lines as stored, or CSV with structured fields flattened.

Both are generators over `BatchStore.results` (which reads Redis a chunk at a time), so an
export of any size holds one chunk of results and one row of text. A CSV's columns must be
known before its first row: they come from the batch's response schema, or else from the
fields of the first `PEEK` results; a field outside them goes, as JSON, to `structured_other`.
Pure: no I/O.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from itertools import chain, islice
from typing import Any

from shared.models.batches import ExportFormat
from shared.spreadsheet import cell

__all__ = [
    "CSV_LEADING",
    "CSV_TRAILING",
    "MEDIA_TYPES",
    "PEEK",
    "Records",
    "csv_lines",
    "export_lines",
    "flatten",
    "jsonl_line",
    "schema_fields",
]

CSV_LEADING = ("id", "line", "status", "attempts", "answer")
CSV_TRAILING = ("structured_other", "tokens", "cost", "denied", "error")
STRUCTURED = "structured."  # the prefix of a flattened field's column
PEEK = 500  # results read for their fields when the batch has no response schema
MAX_FIELDS = 200  # flattened columns at most; the rest go to `structured_other`
MEDIA_TYPES = {ExportFormat.JSONL: "application/x-ndjson", ExportFormat.CSV: "text/csv"}

Result = dict[str, Any]


def export_lines(
    results: Iterable[Result], fmt: ExportFormat, *, schema: Any = None
) -> Iterator[str]:
    """The export's text, a line (a CSV record) at a time, the CSV header first."""
    if fmt is ExportFormat.CSV:
        return csv_lines(results, schema=schema)
    return map(jsonl_line, results)


def jsonl_line(result: Result) -> str:
    return json.dumps(result, ensure_ascii=False, separators=(",", ":")) + "\n"


def csv_lines(results: Iterable[Result], *, schema: Any = None) -> Iterator[str]:
    """A header, then one record per result; every text cell is safe to open in a spreadsheet."""
    rest = iter(results)
    fields = schema_fields(schema)
    head: list[Result] = []
    if not fields:
        head = list(islice(rest, PEEK))
        fields = _seen_fields(head)
    record = Records()
    header = [*CSV_LEADING, *(STRUCTURED + f for f in fields), *CSV_TRAILING]
    yield record.line([cell(name) for name in header])
    for result in chain(head, rest):
        yield record.line(csv_row(result, fields))


def csv_row(result: Result, fields: list[str]) -> list[str]:
    """One result's cells, in the order of `CSV_LEADING`, `fields` and `CSV_TRAILING`."""
    structured = result.get("structured_output")
    flat = flatten(structured) if isinstance(structured, dict) else {}
    other = {k: v for k, v in flat.items() if k not in fields}
    if structured is not None and not isinstance(structured, dict):
        other_cell: Any = structured
    else:
        other_cell = other or None
    usage = result.get("usage") or {}
    leading = [result["id"], result["line"], result["status"], result.get("attempts", 1)]
    leading.append(result.get("text"))
    trailing = [_json(other_cell), usage.get("total_token_count"), _cost(usage)]
    trailing += [result.get("denied", 0), result.get("error")]
    return [cell(v) for v in (*leading, *(flat.get(f) for f in fields), *trailing)]


def flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted paths (`{"a": {"b": 1}}` -> `{"a.b": 1}`); lists stay whole."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        path = f"{prefix}{key}"
        if isinstance(item, dict) and item:
            flat.update(flatten(item, path + "."))
        else:
            flat[path] = item
    return flat


def schema_fields(schema: Any, prefix: str = "") -> list[str]:
    """The dotted paths an answer valid against `schema` may have (its object properties)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    fields: list[str] = []
    for name, sub in schema["properties"].items():
        path = f"{prefix}{name}"
        fields += schema_fields(sub, path + ".") or [path]
    return fields[:MAX_FIELDS]


def _seen_fields(results: list[Result]) -> list[str]:
    """The flattened fields of `results`' structured outputs, in the order first seen."""
    seen: dict[str, None] = {}
    for result in results:
        structured = result.get("structured_output")
        if isinstance(structured, dict):
            seen.update(dict.fromkeys(flatten(structured)))
    return list(seen)[:MAX_FIELDS]


def _cost(usage: dict[str, Any]) -> str:
    """In the prices' unit; blank when no call was priced (never a made-up zero)."""
    micros = int(usage.get("cost_micros") or 0)
    if not usage or (usage.get("unpriced_calls") and not micros):
        return ""
    return f"{micros / 1_000_000:.6f}"


def _json(value: Any) -> Any:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


class Records:
    """CSV records one at a time, through one small buffer."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer)

    def line(self, cells: list[str]) -> str:
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow(cells)
        return self._buffer.getvalue()
