"""Batch results as CSV and JSON lines: columns, flattening, cells a spreadsheet won't run."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

from shared.batches.export import PEEK, csv_lines, export_lines, flatten, schema_fields
from shared.models.batches import ExportFormat
from shared.spreadsheet import safe_cell

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string"},
        "score": {"type": "integer"},
        "meta": {"type": "object", "properties": {"lang": {"type": "string"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}


def result(item_id: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": item_id,
        "line": 1,
        "status": "done",
        "text": None,
        "structured_output": None,
        "usage": None,
        "error": None,
        "denied": 0,
    }
    return base | fields


def rows(lines: Any) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO("".join(lines))))


def test_schema_fields_are_dotted_paths_of_object_properties() -> None:
    assert schema_fields(SCHEMA) == ["label", "score", "meta.lang", "tags"]
    assert schema_fields({"type": "string"}) == [] and schema_fields(None) == []


def test_flatten_keeps_lists_whole_and_nests_objects() -> None:
    assert flatten({"a": {"b": 1, "c": {"d": None}}, "e": [1, {"f": 2}], "g": {}}) == {
        "a.b": 1,
        "a.c.d": None,
        "e": [1, {"f": 2}],
        "g": {},
    }


def test_columns_come_from_the_schema_and_other_fields_go_to_structured_other() -> None:
    usage = {"total_token_count": 42, "cost_micros": 1500, "unpriced_calls": 0}
    found = rows(
        csv_lines(
            [
                result(
                    "a",
                    text="the answer",
                    structured_output={
                        "label": "x",
                        "score": -3,
                        "meta": {"lang": "en"},
                        "tags": ["p", "q"],
                        "extra": True,
                    },
                    usage=usage,
                ),
                result("b", status="failed", error="scripted failure requested"),
                result("c", structured_output=[1, 2]),
            ],
            schema=SCHEMA,
        )
    )
    assert list(found[0]) == [
        "id",
        "line",
        "status",
        "attempts",
        "answer",
        "structured.label",
        "structured.score",
        "structured.meta.lang",
        "structured.tags",
        "structured_other",
        "tokens",
        "cost",
        "denied",
        "error",
    ]
    first = found[0]
    assert (first["structured.label"], first["structured.score"]) == ("x", "-3")  # a number
    assert first["structured.meta.lang"] == "en" and first["structured.tags"] == '["p", "q"]'
    assert first["structured_other"] == '{"extra": true}'
    assert (first["answer"], first["tokens"], first["cost"]) == ("the answer", "42", "0.001500")
    assert found[1]["error"] == "scripted failure requested" and found[1]["tokens"] == ""
    assert found[2]["structured_other"] == "[1, 2]" and found[2]["structured.label"] == ""


def test_without_a_schema_the_first_results_name_the_columns() -> None:
    results = [result("a", structured_output={"x": 1})]
    results += [result(f"n{i}") for i in range(PEEK - 1)]
    results += [result("late", structured_output={"x": 2, "y": {"z": "w"}})]
    found = rows(csv_lines(results))
    structured = [column for column in found[0] if column.startswith("structured")]
    assert structured == ["structured.x", "structured_other"]
    assert len(found) == PEEK + 1
    assert found[-1]["structured.x"] == "2" and found[-1]["structured_other"] == '{"y.z": "w"}'


def test_an_unpriced_result_has_no_cost_rather_than_zero() -> None:
    unpriced = {"total_token_count": 5, "cost_micros": 0, "unpriced_calls": 1}
    free = {"total_token_count": 5, "cost_micros": 0, "unpriced_calls": 0}
    found = rows(csv_lines([result("a", usage=unpriced), result("b", usage=free)]))
    assert [row["cost"] for row in found] == ["", "0.000000"]


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_cells_that_would_start_a_formula_are_neutralised(start: str) -> None:
    hostile = f'{start}HYPERLINK("http://evil.example","x")'
    found = rows(
        csv_lines(
            [
                result(
                    hostile,
                    text=hostile,
                    error=hostile,
                    structured_output={"label": hostile, f"{start}key": 1},
                )
            ],
            schema=None,
        )
    )
    [row] = found
    for column in ("id", "answer", "error", "structured.label"):
        assert row[column] == "'" + hostile, column
    assert row[f"structured.{start}key"] == "1"  # the prefix keeps a header cell text


def test_safe_cell_leaves_other_text_alone() -> None:
    assert safe_cell("plain") == "plain" and safe_cell("") == "" and safe_cell("a=b") == "a=b"


def test_jsonl_is_the_stored_result_one_line_each() -> None:
    rows_in = [result("a", text="é\nline"), result("b", status="failed")]
    lines = list(export_lines(rows_in, ExportFormat.JSONL))
    assert [json.loads(line) for line in lines] == rows_in
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)


def test_csv_is_produced_one_record_at_a_time() -> None:
    """The generator pulls a result per record once the header is out: nothing is held."""
    pulled: list[str] = []

    def results() -> Any:
        for i in range(3):
            pulled.append(f"n{i}")
            yield result(f"n{i}")

    lines = csv_lines(results(), schema=SCHEMA)
    assert next(lines).startswith("id,line,status") and pulled == []
    next(lines)
    assert pulled == ["n0"]
