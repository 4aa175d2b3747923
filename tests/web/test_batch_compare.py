"""Two runs compared on a page and through the API: counts, diffs, fields, filters, errors."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from flask.testing import FlaskClient

from shared.models.batches import BatchState
from tests.web.conftest import submit_batch
from webui.services import Services

ITEMS = [{"id": f"i{n}", "prompt": f"prompt {n}"} for n in range(3)]


def _answered(
    svc: Services, bid: str, answers: list[dict[str, Any]], *, tools: tuple[str, ...] = ()
) -> None:
    """Ends each item with an answer, as the worker's end flush and transition record them:
    the item at line n ran n + 1 seconds and made the calls `tools` names."""
    raw = svc.redis.lrange(svc.keys.batch_items(bid), 0, -1)
    calls = [{"id": f"k{n}", "name": name, "args": {}} for n, name in enumerate(tools)]
    steps = [{"type": "tool_call", "tool_calls": calls}] if calls else []
    for n, (item, answer) in enumerate(zip(map(json.loads, raw), answers, strict=True)):
        response = {"steps": steps, "usage_metadata": {"total_token_count": 4}, **answer}
        turn = svc.keys.turn(item["conversation_id"], item["turn_id"])
        timing = {"started_at": "100.0", "finished_at": repr(101.0 + n)}
        svc.redis.hset(turn, mapping={"response": json.dumps(response), **timing})
        svc.batches.transition(bid, item["conversation_id"], BatchState.DONE)


def _two_runs(http: FlaskClient, svc: Services, headers: dict[str, str]) -> tuple[str, str]:
    first = submit_batch(http, headers, ITEMS)["batch"]["id"]
    second = submit_batch(http, headers, ITEMS)["batch"]["id"]
    _answered(
        svc,
        first,
        [
            {"text": "same words here"},
            {"text": "the old <b>answer</b>"},
            {"text": "{}", "structured_output": {"label": "x", "n": 1}},
        ],
    )
    _answered(
        svc,
        second,
        [
            {"text": "same  words here"},
            {"text": "the new <script>answer</script>"},
            {"text": "{}", "structured_output": {"label": "y", "n": 1}},
        ],
        tools=("calculator", "<clock>"),
    )
    return first, second


def test_the_api_summarises_and_streams_the_items(
    http: FlaskClient, svc: Services, submitter: dict[str, str], viewer: dict[str, str]
) -> None:
    first, second = _two_runs(http, svc, submitter)
    url = f"/api/v1/batches/{first}/compare/{second}"
    assert http.get(url).status_code == 401
    summary = http.get(url, headers=viewer).json
    assert summary["outcomes"] == {
        "agree": 1,
        "differ": 2,
        "only_first": 0,
        "only_second": 0,
        "neither": 0,
    }
    assert summary["fields"] == {
        "label": {"agree": 0, "compared": 1, "rate": 0.0},
        "n": {"agree": 1, "compared": 1, "rate": 1.0},
    }
    assert summary["tokens"] == {"first": 12, "second": 12}
    items = http.get(f"{url}/items?show=changed", headers=viewer)
    assert items.is_streamed and items.mimetype == "application/x-ndjson"
    lines = [json.loads(line) for line in items.text.splitlines()]
    assert [c["id"] for c in lines] == ["i1", "i2"]
    assert lines[0]["answer_diff"] == [
        ["=", "the"],
        ["-", "old <b>answer</b>"],
        ["+", "new <script>answer</script>"],
    ]
    assert [(c["first"]["tool_calls"], c["second"]["tool_calls"]) for c in lines] == [
        ([], ["calculator", "<clock>"]),
        ([], ["calculator", "<clock>"]),
    ]
    assert [(c["first"]["duration_s"], c["second"]["duration_s"]) for c in lines] == [
        (2.0, 2.0),
        (3.0, 3.0),
    ]
    table = http.get(f"{url}/items?format=csv", headers=viewer)
    rows = list(csv.DictReader(io.StringIO(table.text)))
    assert [r["second_tool_calls"] for r in rows] == ["calculator <clock>"] * 3
    assert [(r["first_duration_s"], r["second_duration_s"]) for r in rows] == [
        ("1.0", "1.0"),
        ("2.0", "2.0"),
        ("3.0", "3.0"),
    ]
    assert http.get(f"{url}/items?show=bogus", headers=viewer).status_code == 400
    missing = http.get(f"/api/v1/batches/{first}/compare/nope", headers=viewer)
    assert missing.status_code == 404
    other = submit_batch(http, submitter, [{"id": "x", "prompt": "p"}])["batch"]["id"]
    for path in (
        f"/api/v1/batches/{first}/compare/{other}",
        f"/api/v1/batches/{first}/compare/{other}/items",
    ):
        refused = http.get(path, headers=viewer)
        assert refused.status_code == 422, path
        assert "are not runs of the same inputs: item 0 is 'i0'" in refused.text


def test_the_page_shows_where_they_differ(
    signed_in: FlaskClient, svc: Services, submitter: dict[str, str]
) -> None:
    first, second = _two_runs(signed_in, svc, submitter)
    page = signed_in.get(f"/batches/{first}/compare/{second}").text
    assert '<td data-outcome="agree">1</td>' in page and '<td data-outcome="differ">2</td>' in page
    assert "<del>old &lt;b&gt;answer&lt;/b&gt;</del>" in page
    assert "<ins>new &lt;script&gt;answer&lt;/script&gt;</ins>" in page
    assert "<script>answer" not in page
    assert '<code>label</code></td><td>0</td><td>1</td><td data-rate="0.0">0%</td>' in page
    changed = signed_in.get(f"/batches/{first}/compare/{second}?show=changed").text
    assert changed.count('<tr data-outcome="differ">') == 2
    assert '<tr data-outcome="agree">' not in changed and page.count("<tr data-outcome=") == 3
    assert f"/api/v1/batches/{first}/compare/{second}/items?format=csv&amp;show=changed" in changed
    assert '<td class="compare-tools">none → calculator, &lt;clock&gt;</td>' in page
    assert '<td class="compare-duration">3.0 s → 3.0 s</td>' in page
    assert "<clock>" not in page
