"""What the benchmarks share: a private Redis, round-trip counting, percentiles, the report file."""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "benchmarks.md"
# The worker concurrency of every benchmark's Signoff worker and of its bare Celery baseline.
CONCURRENCY = 8


class CountingConnection(redis.Connection):
    """Counts packets sent: one per command, one per pipeline, that is one per round trip."""

    sent = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.sent += 1
        super().send_packed_command(command, check_health)


def counting_client(url: str) -> redis.Redis:
    pool = redis.ConnectionPool.from_url(
        url, connection_class=CountingConnection, decode_responses=True
    )
    return redis.Redis(connection_pool=pool)


def round_trips(action: Callable[[], object]) -> int:
    before = CountingConnection.sent
    action()
    return CountingConnection.sent - before


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def median(values: list[float]) -> float:
    return statistics.median(values)


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def peak_rss_mb(pid: int) -> float:
    """A process's high-water mark of resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_process(
    command: list[str], env: dict[str, str], log: Path, *, ready: int = 1
) -> subprocess.Popen[bytes]:
    """`command` with `env` added, once its log says it is ready (a Celery worker's "ready.",
    `ready` times: one for each Celery worker it runs)."""
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while log.read_text(errors="replace").count("ready.") < ready:
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError(log.read_text())
        time.sleep(0.1)
    return process


def stop_process(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(timeout=30)


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`python -m worker worker` with `env`, once both its Celery workers (turns and webhook
    deliveries) say they are ready: the deliveries worker is ready seconds before the turns
    worker, whose start would otherwise run inside the measurement (its CPU counted per turn,
    the first turns waiting for it)."""
    return start_process([sys.executable, "-m", "worker", "worker"], env, log, ready=2)


def start_noop_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """The baseline's worker: bare Celery (`bench/noop_app.py`), thread pool, `CONCURRENCY`."""
    command = [sys.executable, "-m", "celery", "-A", "bench.noop_app", "worker", "--pool=threads"]
    command += [f"--concurrency={CONCURRENCY}", "-Q", "bench.noop"]
    command += ["--without-gossip", "--without-mingle", "--loglevel=INFO"]
    return start_process(command, env, log)


def machine() -> str:
    return f"{platform.machine()}, Python {platform.python_version()}, {platform.system()}"


def reference_cpu_s() -> float:
    """CPU seconds this process takes for a fixed pure-Python loop (10 million additions): how
    fast the shared machine runs just then, so that absolute figures (CPU per turn, turns per
    second) of runs made in faster and slower spells can be told apart."""
    started, total = time.process_time(), 0
    for n in range(10_000_000):
        total += n
    return time.process_time() - started


def write_section(name: str, body: str) -> None:
    """Replaces the section between this benchmark's markers (adding it if new)."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    text = REPORT.read_text() if REPORT.exists() else _HEADER
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.DOTALL)
    text = (
        pattern.sub(lambda _: block, text)
        if pattern.search(text)
        else text.rstrip() + "\n\n" + block + "\n"
    )
    REPORT.write_text(text)


_HEADER = """# Benchmarks

Measured by `make bench` (that is `.venv/bin/python -m bench`; one benchmark: `python -m bench history`).
Each figure is a ratio against a baseline measured in the same run on the same machine, because these
machines are noisy; absolute numbers are given for scale only. Every section is rewritten by its run.
"""


@contextmanager
def scripted_stack() -> Iterator[tuple[dict[str, str], Path]]:
    """A private Redis and the environment of a worker on the scripted model at zero delay
    (also set in this process, for its clients), with a fresh directory for the logs."""
    from shared.local.embedded_redis import EmbeddedRedis  # the bench's own imports stay light

    logs = Path("/tmp") / f"signoff-bench-{os.urandom(3).hex()}"
    logs.mkdir()
    with EmbeddedRedis() as redis_server:
        env = {
            "SIGNOFF_REDIS_URL": redis_server.url,
            "SIGNOFF_SCRIPTED_TOKEN_DELAY_MS": "0",
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
        }
        os.environ.update(env)
        yield env, logs
