"""Metric label values stay bounded, and each run's directory of metric files is its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from shared.metrics.labels import NONE, OTHER, BoundedLabel
from shared.metrics.runs import ENV, RunDir
from shared.settings import Settings


def test_a_label_takes_at_most_its_bound_of_values() -> None:
    label = BoundedLabel("model", limit=3)
    assert [label(f"m{i}") for i in range(5)] == ["m0", "m1", "m2", OTHER, OTHER]
    assert label("m1") == "m1"  # a known value stays itself past the bound
    assert label("") == NONE and label(None) == NONE
    assert label("x" * 500) == OTHER
    assert len(BoundedLabel("tool")("y" * 500)) == 80


def test_a_run_gets_a_fresh_directory_and_removes_dead_runs(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (tmp_path / f"worker-{dead}").mkdir()
    (tmp_path / f"worker-{dead}" / "counter_1.db").write_bytes(b"old")
    live = tmp_path / f"web-{os.getppid()}"
    live.mkdir()
    previous = os.environ.get(ENV)
    run = RunDir(Settings(metrics_dir=str(tmp_path)), "beat")
    try:
        run.open()
        assert os.environ[ENV] == str(run.path) == str(tmp_path / f"beat-{os.getpid()}")
        assert not (tmp_path / f"worker-{dead}").exists()  # its process is gone
        assert live.exists()  # another run still going
        assert list(run.path.iterdir()) == []
    finally:
        run.close()
        if previous is not None:
            os.environ[ENV] = previous
    assert not run.path.exists() and os.environ.get(ENV) == previous


def test_values_go_to_the_run_directory_even_when_the_library_came_first(tmp_path: Path) -> None:
    script = f"""
import prometheus_client  # imported before the run's directory is known
from shared.metrics.runs import RunDir, render
from shared.settings import Settings
run = RunDir(Settings(metrics_dir={str(tmp_path)!r}), "worker").open()
from shared.metrics import series
series.LEGS.labels("finished").inc(3)
import os
print(sorted(os.listdir(run.path)))
print([l for l in render()[0].decode().splitlines() if l.startswith("signoff_legs_total")])
"""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    files, samples = done.stdout.splitlines()
    assert "counter_" in files
    assert samples == "['signoff_legs_total{outcome=\"finished\"} 3.0']"
