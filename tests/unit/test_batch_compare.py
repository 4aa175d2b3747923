"""Two runs compared item by item: outcomes, the word diff, fields, the tally and its CSV."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from shared.batches.compare import Tally, compare_csv_lines, compare_pair, word_diff
from shared.batches.result import item_result


def result(item_id: str = "a", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": item_id,
        "line": 1,
        "status": "done",
        "text": "the same answer",
        "structured_output": None,
        "usage": {"total_token_count": 10, "cost_micros": 5, "unpriced_calls": 0},
        "error": None,
        "denied": 0,
        "denials": [],
        "attempts": 1,
        "conversation_id": f"c-{item_id}",
        "tool_calls": ["calculator"],
        "duration_s": 1.25,
    }
    return base | fields


def test_outcomes() -> None:
    same = compare_pair(result(), result(text="the  same\nanswer"))
    assert same["outcome"] == "agree" and same["answer_diff"] == [["=", "the same answer"]]
    differ = compare_pair(result(), result(text="another answer"))
    assert differ["outcome"] == "differ"
    failed = result(status="failed", text=None, error="boom")
    assert compare_pair(result(), failed)["outcome"] == "only_first"
    assert compare_pair(failed, result())["outcome"] == "only_second"
    denied = result(denied=1, denials=["denied (by ada): no"])
    compared = compare_pair(denied, failed)
    assert compared["outcome"] == "neither" and compared["first"]["status"] == "denied"
    assert compared["second"]["error"] == "boom"


def test_structured_answers_agree_on_their_values_not_their_text() -> None:
    a = result(structured_output={"label": "x", "meta": {"n": 1}}, text='{"label":"x"}')
    b = result(structured_output={"meta": {"n": 1}, "label": "x"}, text='{ "label": "x" }')
    assert compare_pair(a, b)["outcome"] == "agree"
    c = result(structured_output={"label": "y", "meta": {"n": 1}, "extra": True})
    fields = {f["field"]: f["agree"] for f in compare_pair(a, c)["fields"]}
    assert fields == {"label": False, "meta.n": True, "extra": False}


def test_the_word_diff_keeps_order_and_says_what_changed() -> None:
    diff = word_diff("the cat sat on the mat", "the dog sat on a mat today")
    assert diff.segments == [
        ["=", "the"],
        ["-", "cat"],
        ["+", "dog"],
        ["=", "sat on"],
        ["-", "the"],
        ["+", "a"],
        ["=", "mat"],
        ["+", "today"],
    ]
    long = word_diff("w " * 6000, "w " * 6000)
    assert long.truncated and long.segments == [["=", " ".join(["w"] * 5000)]]


def test_the_tally_rates_each_field_over_items_both_runs_succeeded() -> None:
    tally = Tally()
    for n in range(10):
        a = result(f"i{n}", structured_output={"label": "x", "n": n})
        b = result(f"i{n}", structured_output={"label": "x" if n < 7 else "y", "n": n})
        tally.add(compare_pair(a, b))
    tally.add(compare_pair(result("f"), result("f", status="failed", text=None, usage=None)))
    summary = tally.summary()
    assert summary["total"] == 11
    assert summary["outcomes"] == {
        "agree": 7,
        "differ": 3,
        "only_first": 1,
        "only_second": 0,
        "neither": 0,
    }
    assert summary["fields"]["label"] == {"agree": 7, "compared": 10, "rate": 0.7}
    assert summary["fields"]["n"] == {"agree": 10, "compared": 10, "rate": 1.0}
    assert summary["tokens"] == {"first": 110, "second": 100}  # the failed one used none
    assert summary["cost_micros"] == {"first": 55, "second": 50}


def test_the_csv_has_a_row_per_item_and_no_formula() -> None:
    rows = list(
        csv.DictReader(
            io.StringIO(
                "".join(
                    compare_csv_lines([compare_pair(result("=1+1"), result("=1+1", text="@other"))])
                )
            )
        )
    )
    assert [(r["id"], r["outcome"], r["second_answer"]) for r in rows] == [
        ("'=1+1", "differ", "'@other")
    ]
    assert rows[0]["first_cost"] == "0.000005" and rows[0]["first_tokens"] == "10"


def test_each_side_has_its_tool_calls_and_duration_and_so_has_the_csv() -> None:
    second = result(tool_calls=["calculator", "clock"], duration_s=0.5)
    failed = result(status="failed", text=None, tool_calls=None, duration_s=None)
    compared = compare_pair(result(), second)
    assert (compared["first"]["tool_calls"], compared["first"]["duration_s"]) == (
        ["calculator"],
        1.25,
    )
    assert compared["second"]["tool_calls"] == ["calculator", "clock"]
    rows = list(
        csv.DictReader(
            io.StringIO("".join(compare_csv_lines([compared, compare_pair(failed, second)])))
        )
    )
    assert [(r["first_tool_calls"], r["second_tool_calls"]) for r in rows] == [
        ("calculator", "calculator clock"),
        ("", "calculator clock"),
    ]
    assert [(r["first_duration_s"], r["second_duration_s"]) for r in rows] == [
        ("1.25", "0.5"),
        ("", "0.5"),
    ]


def test_a_result_reads_its_tool_calls_from_the_answer_and_its_duration_from_the_turn() -> None:
    item = {"id": "a", "line": 1, "conversation_id": "c"}
    call = {"id": "k", "name": "calculator", "args": {}}
    steps = [
        {"type": "user_input"},
        {"type": "tool_call", "tool_calls": [call, {**call, "id": "m", "name": "clock"}]},
        {"type": "tool_result", "tool_calls": [call]},
        {"type": "tool_call", "tool_calls": [call]},
    ]
    turn = {"response": json.dumps({"text": "t", "steps": steps})}
    done = item_result(item, "done", {**turn, "started_at": "10.5", "finished_at": "12.25"})
    assert done["tool_calls"] == ["calculator", "clock", "calculator"]
    assert done["duration_s"] == 1.75
    none_made = item_result(item, "done", {"response": '{"text": "t", "steps": []}'})
    assert none_made["tool_calls"] == [] and none_made["duration_s"] is None
    failed = item_result(item, "failed", {"error": "boom", "started_at": "1", "finished_at": "4"})
    assert failed["tool_calls"] is None and failed["duration_s"] == 3.0
