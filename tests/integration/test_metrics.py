"""Prometheus metrics of real processes: `signoff web` (two gunicorn workers) and `signoff
worker` (two Celery children), scraped and read with prometheus-client's own parser.

After a known workload every counter moved by exactly that workload; the pending gauge
follows approvals up and down; no label value is an id; `/metrics` of the web refuses
a caller without the metrics token or an operator's credentials.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.client import Client
from shared.errors import SignoffError
from shared.local.embedded_redis import free_port
from shared.models.notifications import Allow, Deny
from shared.models.steps import UsageMetadata
from tests.integration.test_cli_approvals import doctor_lines
from tests.integration.test_web_command import wait_healthy
from tests.stack import ROOT, SIGNOFF, WorkerProcess, effect_prompt, parked, run_cli

pytestmark = pytest.mark.integration

EFFECT_TOOLS = True  # tests.effect_tools: record_effect, a tool that writes a line
TOKEN = "metrics-token-for-the-test-0123456789"
WORKER_PORT = free_port()
STACK_ENV = {"SIGNOFF_FLUSH_INTERVAL_MS": "10", "SIGNOFF_METRICS_TOKEN": TOKEN}

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
# what ids look like here: 20 hex digits (conversations, turns), 16 in call ids, uuids
ID_LIKE = re.compile(r"[0-9a-f]{12,}|[0-9a-f]{8}-[0-9a-f]{4}-")


def scrape(url: str, token: str | None = TOKEN) -> Samples:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when none has them)."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and wanted <= have)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


@pytest.fixture(scope="module")
def metrics_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("metrics")


@pytest.fixture(scope="module")
def worker(stack_env: dict[str, str], metrics_dir: Path) -> Iterator[WorkerProcess]:
    env = {
        **stack_env,
        "SIGNOFF_METRICS_PORT": str(WORKER_PORT),
        "SIGNOFF_METRICS_DIR": str(metrics_dir),
    }
    process = WorkerProcess(env).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def web(stack_env: dict[str, str], metrics_dir: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        **stack_env,
        "SIGNOFF_WEB_PORT": str(port),
        "SIGNOFF_WEB_WORKERS": "2",
        "SIGNOFF_SECRET_KEY": "k" * 32,
        "SIGNOFF_METRICS_DIR": str(metrics_dir),
    }
    process = subprocess.Popen(
        [SIGNOFF, "web"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def worker_metrics() -> Samples:
    return scrape(f"http://127.0.0.1:{WORKER_PORT}/metrics", token=None)


def pending_gauge(web: str) -> float:
    return value(scrape(f"{web}/metrics"), "signoff_approvals_pending", tool="record_effect")


def test_web_metrics_refuse_callers_without_the_token(web: str) -> None:
    for token in (None, "wrong-token", TOKEN[:-1]):
        with pytest.raises(urllib.error.HTTPError) as refused:
            scrape(f"{web}/metrics", token=token)
        assert refused.value.code == 401
    assert value(scrape(f"{web}/metrics"), "signoff_redis_up") == 1


def test_the_web_counts_requests_of_all_its_workers(web: str) -> None:
    before = scrape(f"{web}/metrics")
    for _ in range(12):  # a new connection each: gunicorn's two workers share them
        with urllib.request.urlopen(f"{web}/healthz", timeout=5):
            pass
    after = scrape(f"{web}/metrics")
    labels = {"route": "/healthz", "method": "GET", "status": "200"}
    assert moved(before, after, "signoff_http_requests_total", **labels) == 12


def test_a_known_workload_moves_every_counter_by_exactly_that(
    client: Client, worker: WorkerProcess, web: str, effects: Path
) -> None:
    before = worker_metrics()
    pending_before = pending_gauge(web)
    asked = {"record_effect": "ask"}
    turns, notes = [], []
    for count in range(1, 5):  # one park at a time: the gauge goes up by one each
        conversation = client.new_conversation(tools=asked)
        turns.append((conversation, conversation.send(effect_prompt(f"n{count}"))))
        notes += parked(conversation)
        assert pending_gauge(web) == pending_before + count
    auto = client.new_conversation(tools={"record_effect": "auto"})
    plain = client.new_conversation()
    turns += [(auto, auto.send(effect_prompt("auto"))), (plain, plain.send("hello"))]
    broken = client.new_conversation(model="no-such-model")
    failing = broken.send("hello")

    decisions = [Allow(), Allow(arguments={"note": "edited"}), Deny(reason="no"), Deny(reason="no")]
    for left, (note, decision) in enumerate(zip(notes, decisions, strict=True)):
        client.resolve_notification(note.id, decision, actor="alice")
        assert pending_gauge(web) == pending_before + 3 - left  # and down
    usage = UsageMetadata()
    for conversation, turn in turns:
        response = conversation.wait_for_turn(turn, timeout=30)
        usage = usage + (response.usage_metadata or UsageMetadata())
    with pytest.raises(SignoffError):
        broken.wait_for_turn(failing, timeout=30)
    after = _settled(before, turns=7)

    def delta(name: str, **labels: str) -> float:
        return moved(before, after, name, **labels)

    assert delta("signoff_turns_started_total") == 7
    assert delta("signoff_turns_ended_total", status="completed") == 6
    assert delta("signoff_turns_ended_total", status="failed") == 1
    assert delta("signoff_turns_ended_total", status="cancelled") == 0
    assert delta("signoff_turn_failures_total", code="provider_error", model="no-such-model") == 1
    assert delta("signoff_turn_duration_seconds_count") == 7
    tool = {"tool": "record_effect"}
    assert delta("signoff_tool_calls_total", outcome="allowed", **tool) == 1
    assert delta("signoff_tool_calls_total", outcome="allowed_with_edits", **tool) == 1
    assert delta("signoff_tool_calls_total", outcome="denied", **tool) == 2
    assert delta("signoff_tool_calls_total", outcome="auto", **tool) == 1
    assert delta("signoff_tool_calls_total") == 5
    assert delta("signoff_approvals_requested_total", **tool) == 4
    assert delta("signoff_approval_wait_seconds_count", decision="allowed") == 1
    assert delta("signoff_approval_wait_seconds_count", decision="denied") == 2
    assert delta("signoff_approval_wait_seconds_count") == 4
    # two model calls per tool turn, one for the plain turn, one that failed
    assert delta("signoff_model_calls_total", outcome="ok") == 11
    assert delta("signoff_model_calls_total", outcome="error") == 1
    assert delta("signoff_model_call_duration_seconds_count") == 12
    assert delta("signoff_model_time_to_first_token_seconds_count") == 11
    assert delta("signoff_model_tokens_total", direction="input") == usage.prompt_token_count
    assert delta("signoff_model_tokens_total", direction="output") == (usage.candidates_token_count)
    assert effects.read_text().count("\n") >= 3  # the three calls that ran did run
    # Redis as the worker sees it: every turn's start and end is a flush script's round trip
    assert delta("signoff_redis_script_duration_seconds_count", script="flush") >= 2 * 7
    assert delta("signoff_redis_script_duration_seconds_sum", script="flush") > 0
    for samples in (after, scrape(f"{web}/metrics")):
        labels = {v for (_, have) in samples for _, v in have}
        assert not [v for v in labels if ID_LIKE.search(v)], "an id became a label value"


def _settled(before: Samples, *, turns: int) -> Samples:
    """The worker's metrics once it counted `turns` ends (a turn's end is counted right after
    the flush a client sees, so a scrape may come first)."""
    for _ in range(100):
        after = worker_metrics()
        if moved(before, after, "signoff_turns_ended_total") >= turns:
            return after
        time.sleep(0.05)
    raise AssertionError("the worker did not count the turns' ends")


def test_doctor_says_where_metrics_are_served(
    stack_env: dict[str, str], worker: WorkerProcess
) -> None:
    env = {**stack_env, "SIGNOFF_METRICS_PORT": str(WORKER_PORT)}
    line = doctor_lines(run_cli(env, "doctor"))["metrics"]
    assert line == (
        "ok web /metrics (operators, and the SIGNOFF_METRICS_TOKEN bearer); "
        f"worker http://127.0.0.1:{WORKER_PORT}/metrics; beat off (SIGNOFF_BEAT_METRICS_PORT unset)"
    )
    silent = free_port()
    env["SIGNOFF_BEAT_METRICS_PORT"] = str(silent)
    line = doctor_lines(run_cli(env, "doctor"))["metrics"]
    assert line.startswith("warn ") and line.endswith(
        f"nothing answers for beat at http://127.0.0.1:{silent}/metrics: is it running here?"
    )
