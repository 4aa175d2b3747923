"""A 10,000-prompt batch through `signoff batch run`: prompts per second and peak memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench.common import (
    CONCURRENCY,
    machine,
    peak_rss_mb,
    start_worker,
    stop_process,
    write_section,
)
from bench.throughput import bare_celery
from shared.local.embedded_redis import EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = 10_000


def _signoff(env: dict[str, str], logs: Path) -> tuple[float, float, float]:
    source = logs / "prompts.jsonl"
    with source.open("w") as sink:
        for i in range(PROMPTS):
            sink.write(
                json.dumps({"id": f"p{i}", "prompt": f"Summarise item {i} in one line."}) + "\n"
            )
    worker = start_worker(
        {**env, "SIGNOFF_WORKER_CONCURRENCY": str(CONCURRENCY)}, logs / "signoff-batch.log"
    )
    try:
        started = time.perf_counter()
        cli = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("signoff")),
                "batch",
                "run",
                str(source),
                "--out",
                str(logs / "results.jsonl"),
                "--max-concurrency",
                "32",
            ],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=(logs / "cli.log").open("wb"),
        )
        cli_peak = 0.0
        while cli.poll() is None:
            cli_peak = max(cli_peak, _safe_peak(cli.pid))
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
        assert cli.returncode == 0, (logs / "cli.log").read_text()[-2000:]
        lines = (logs / "results.jsonl").read_text().splitlines()
        assert len(lines) == PROMPTS and all(json.loads(line)["status"] == "done" for line in lines)
        return PROMPTS / elapsed, peak_rss_mb(worker.pid), cli_peak
    finally:
        stop_process(worker)


def _safe_peak(pid: int) -> float:
    try:
        return peak_rss_mb(pid)
    except OSError:
        return 0.0


def run() -> dict[str, float]:
    logs = Path("/tmp") / f"signoff-bench-{uuid.uuid4().hex[:6]}"
    logs.mkdir()
    with EmbeddedRedis() as server:
        env = {
            "SIGNOFF_REDIS_URL": server.url,
            "SIGNOFF_KEY_PREFIX": "benchbatch",
            "SIGNOFF_SCRIPTED_TOKEN_DELAY_MS": "0",
            "PYTHONPATH": str(ROOT),
        }
        os.environ.update(env)
        bare_rate, bare_mb = bare_celery(env, logs, PROMPTS)
        rate, worker_mb, cli_mb = _signoff(env, logs)
    write_section(
        "batch",
        f"""
## Batches: 10,000 prompts (`python -m bench batch`)

`signoff batch run` with a {PROMPTS:,}-line file on the scripted model at zero delay (each prompt its own
conversation: thinking, an answer, history, usage, events, the result line), cap 32, one worker (its
default gevent pool, concurrency {CONCURRENCY}); wall time from starting the CLI to the results file
being written, so submission is included. Beside it, {PROMPTS:,} bare Celery no-op tasks (each counts
itself on one pooled Redis client, as Signoff's worker keeps one) on the same private redis-server,
Celery's thread pool, concurrency {CONCURRENCY}, in the same run. Peak memory is the process's VmHWM.
Machine: {machine()}.

| workload | per second | ratio | worker peak RSS | CLI peak RSS |
|---|---|---|---|---|
| bare Celery no-op tasks (baseline) | {bare_rate:.0f} | 1.00 | {bare_mb:.0f} MB | |
| Signoff batch | {rate:.0f} | {rate / bare_rate:.2f} | {worker_mb:.0f} MB ({worker_mb / bare_mb:.2f}x) | {cli_mb:.0f} MB |

Before issue 27 this section recorded 0.71 (209 against 295 a second), against a **handicapped
baseline** whose no-op task opened a new Redis connection for every task; it is not comparable.
""",
    )
    return {
        "bare_per_s": bare_rate,
        "batch_per_s": rate,
        "worker_mb": worker_mb,
        "cli_mb": cli_mb,
        "bare_worker_mb": bare_mb,
    }


if __name__ == "__main__":
    print(run())
