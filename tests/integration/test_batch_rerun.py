"""Re-running a batch with another agent version, and comparing two runs, with a real worker."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from shared.client import Client
from shared.models.agents import AgentSpec, NewAgent
from shared.models.batches import BatchState, BatchStatus
from shared.store.batches import BatchStore
from shared.store.users import TokenStore
from tests.stack import run_cli
from webui import create_app


def test_a_rerun_with_another_agent_version_links_to_its_source(
    tmp_path: Path, stack_env: dict[str, str], client: Client
) -> None:
    agents = client.stores.agents
    agents.create(NewAgent(name="triage", system_prompt="Sort tickets."), actor="op")
    agents.update(
        "triage", AgentSpec(system_prompt="Sort tickets well.", model="scripted-v2"), actor="op"
    )
    source = tmp_path / "tickets.jsonl"
    source.write_text(
        "".join(json.dumps({"id": f"t{n}", "prompt": f"ticket {n}"}) + "\n" for n in range(6))
        + "{not json\n"
    )
    out = tmp_path / "out.jsonl"
    first = run_cli(stack_env, "batch", "run", str(source), "--out", str(out), "--agent", "triage")
    assert first.returncode == 0, first.stderr
    bid = (tmp_path / "out.jsonl.batch").read_text().strip()
    store = BatchStore(client.redis, client.keys, client.settings, client.tasks)
    assert store.info(bid).config.conversation.agent_version == 2  # the latest, then
    agents.update("triage", AgentSpec(system_prompt="v3", model="scripted-v3"), actor="op")
    rerun = run_cli(stack_env, "batch", "rerun", bid, "--agent", "triage@3", "--wait")
    assert rerun.returncode == 0, rerun.stderr
    new = rerun.stdout.strip()
    assert f"re-runs {bid}: submitted 6, already there 0, invalid in the source 1" in " ".join(
        rerun.stderr.split()
    )
    info = store.info(new)
    assert info.source == bid and info.status is BatchStatus.DONE
    assert (info.counts[BatchState.DONE], info.counts[BatchState.INVALID]) == (6, 1)
    config = info.config.conversation
    assert (config.agent, config.agent_version, config.model) == ("triage", 3, "scripted-v3")
    printed = run_cli(stack_env, "batch", "results", new).stdout
    results = [json.loads(line) for line in printed.splitlines()]
    assert [r["id"] for r in results] == [f"t{n}" for n in range(6)] + ["line-7"]
    ran = client.conversation(results[0]["conversation_id"]).record().config
    assert (ran.agent_version, ran.model) == (3, "scripted-v3")
    status = run_cli(stack_env, "batch", "status", new)
    assert f"{new} (re-run of {bid}): done" in status.stdout
    refused = run_cli(stack_env, "batch", "rerun", bid, "--agent", "triage@x")
    assert refused.returncode == 1 and "write NAME or NAME@VERSION" in refused.stderr


SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["label", "n"],
}


def test_compare_lists_exactly_the_items_whose_answers_differ(
    tmp_path: Path, stack_env: dict[str, str], client: Client
) -> None:
    """7 of 20 items ask the time, so their answers change from one run to the next."""
    timed = {f"g{n}" for n in range(7)}
    rows = [{"id": f"g{n}", "prompt": "call get_time {}"} for n in range(7)]
    rows += [{"id": f"p{n}", "prompt": f"plain {n}"} for n in range(13)]
    rows.sort(key=lambda row: row["id"][::-1])  # interleaved
    source = tmp_path / "mixed.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    out = tmp_path / "mixed-out.jsonl"
    first = run_cli(
        stack_env, "batch", "run", str(source), "--out", str(out), "--schema", str(schema)
    )
    assert first.returncode == 0, first.stderr
    bid = (tmp_path / "mixed-out.jsonl.batch").read_text().strip()
    time.sleep(1.1)  # get_time answers to the second
    new = run_cli(stack_env, "batch", "rerun", bid, "--wait").stdout.strip()
    compared = run_cli(
        stack_env, "batch", "compare", bid, new, "--format", "jsonl", "--show", "changed"
    )
    assert compared.returncode == 0, compared.stderr
    items = [json.loads(line) for line in compared.stdout.splitlines()]
    assert {i["id"] for i in items} == timed and all(i["outcome"] == "differ" for i in items)
    for item in items:
        removed = [text for op, text in item["answer_diff"] if op == "-"]
        added = [text for op, text in item["answer_diff"] if op == "+"]
        assert removed and added and removed != added
        fields = {f["field"]: f["agree"] for f in item["fields"]}
        assert fields == {"label": False, "n": True}
        for side in ("first", "second"):  # the real worker's calls and timings
            assert item[side]["tool_calls"] == ["get_time"], item[side]
            assert 0 < item[side]["duration_s"] < 60
    said = " ".join(compared.stderr.split())
    assert "20 items: both succeeded and agree 13, differ 7;" in said
    assert "label: agree 13/20 (65%)" in said and "n: agree 20/20 (100%)" in said
    api = create_app(client.settings).test_client()
    token = TokenStore(client.redis, client.keys).create("compare-viewer", "viewer")
    headers = {"Authorization": f"Bearer {token}"}
    summary = api.get(f"/api/v1/batches/{bid}/compare/{new}", headers=headers).get_json()
    assert summary["outcomes"]["differ"] == 7 and summary["fields"]["label"]["rate"] == 0.65
    assert summary["batches"]["second"]["source"] == bid
    table = api.get(
        f"/api/v1/batches/{bid}/compare/{new}/items?show=changed&format=csv", headers=headers
    )
    assert table.mimetype == "text/csv" and len(table.text.splitlines()) == 1 + 7
    every = [
        json.loads(line)
        for line in run_cli(
            stack_env, "batch", "compare", bid, new, "--format", "jsonl"
        ).stdout.splitlines()
    ]
    assert {tuple(i["first"]["tool_calls"]) for i in every if i["id"] not in timed} == {()}
    wide = {**stack_env, "COLUMNS": "200"}
    shown = run_cli(wide, "batch", "compare", bid, new)  # the table: changed items
    assert shown.returncode == 0, shown.stderr
    sides = re.findall(r"done, calls get_time, (\d+\.\d) s", shown.stdout)
    assert len(sides) == 2 * 7, shown.stdout
    unrelated = run_cli(stack_env, "batch", "compare", bid, _other_batch(tmp_path, stack_env))
    assert unrelated.returncode == 1 and "are not runs of the same inputs" in unrelated.stderr


def _other_batch(tmp_path: Path, stack_env: dict[str, str]) -> str:
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "zzz", "prompt": "x"}) + "\n")
    made = run_cli(
        stack_env, "batch", "run", str(other), "--out", str(tmp_path / "o.jsonl"), "--no-wait"
    )
    return made.stdout.strip()
