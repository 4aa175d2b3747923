"""`signoff worker` keeps its Celery worker running: restarted after a death, stopped with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared.client import Client
from tests.stack import ROOT, WorkerProcess
from worker import respawn as respawn_module
from worker.respawn import respawn


def celery_children(parent: int) -> dict[str, int]:
    """The pids of the Celery workers a `python -m worker worker` runs: turns and webhooks."""
    tasks = Path(f"/proc/{parent}/task").iterdir()  # each child is started by a thread of its own
    found = [pid for task in tasks for pid in (task / "children").read_text().split()]
    assert len(found) == 2, found
    kinds = {}
    for pid in found:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        queue = command[command.index(b"-Q") + 1].decode()
        kinds["webhooks" if queue.endswith("webhooks") else "turns"] = int(pid)
    assert set(kinds) == {"turns", "webhooks"}, kinds
    return kinds


def celery_child(parent: int) -> int:
    """The pid of the Celery worker that runs turns."""
    return celery_children(parent)["turns"]


def test_a_celery_worker_that_dies_is_restarted_and_turns_go_on(
    stack_env: dict[str, str], client: Client
) -> None:
    keeper = WorkerProcess(stack_env, name="respawn").start()
    try:
        assert keeper.process is not None
        first = celery_children(keeper.process.pid)
        os.kill(first["turns"], signal.SIGKILL)  # what kombu's "Unrecoverable error" amounts to
        deadline = time.monotonic() + 30
        while keeper.log().count("ready.") < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert keeper.log().count("ready.") == 3, keeper.log()
        assert "restarting in 1 s" in keeper.log()
        now = celery_children(keeper.process.pid)
        second = now["turns"]
        assert second != first["turns"] and now["webhooks"] == first["webhooks"]
        response = client.new_conversation().chat_to_completion("after the restart")
        assert "after the restart" in response.text
    finally:
        keeper.stop()
    assert keeper.process is None  # SIGTERM ended it: nothing restarted
    assert not Path(f"/proc/{second}").exists()


def test_sigkill_of_the_keeper_takes_the_celery_worker_with_it(stack_env: dict[str, str]) -> None:
    keeper = WorkerProcess(stack_env, name="orphan").start()
    assert keeper.process is not None
    children = celery_children(keeper.process.pid).values()
    keeper.kill()
    for child in children:
        deadline = time.monotonic() + 5
        while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        status = Path(f"/proc/{child}/status")
        assert not status.exists() or "zombie" in status.read_text()


def test_a_child_that_keeps_dying_at_start_is_given_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(respawn_module, "FIRST_DELAY_S", 0.05)
    runs = tmp_path / "runs"
    script = f"open({str(runs)!r}, 'a').write('x'); raise SystemExit(3)"
    assert respawn([sys.executable, "-c", script]) == 3
    assert runs.read_text() == "xxx"


def test_a_child_that_lived_long_enough_is_restarted_until_it_exits_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(respawn_module, "FIRST_DELAY_S", 0.05)
    monkeypatch.setattr(respawn_module, "QUICK_EXIT_S", 0.2)
    runs = tmp_path / "runs"
    script = (
        "import time; from pathlib import Path; p = Path(" + repr(str(runs)) + "); "
        "n = len(p.read_text()) if p.exists() else 0; p.write_text('x' * (n + 1)); "
        "time.sleep(0.3); raise SystemExit(0 if n >= 4 else 1)"
    )
    assert respawn([sys.executable, "-c", script]) == 0
    assert runs.read_text() == "xxxxx"


def test_one_child_given_up_stops_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers kept at once: one that keeps dying at start is given up, and the other,
    healthy one is stopped with it, so the exit is seen."""
    monkeypatch.setattr(respawn_module, "FIRST_DELAY_S", 0.05)
    stopped = tmp_path / "stopped"
    healthy = (
        "import signal, sys, time; from pathlib import Path\n"
        "def stop(*_): Path(" + repr(str(stopped)) + ").write_text('yes'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    assert (
        respawn([sys.executable, "-c", healthy], [sys.executable, "-c", "raise SystemExit(4)"]) == 4
    )
    assert stopped.read_text() == "yes" and time.monotonic() - started < 30


UNRECOVERABLE = """
import sys
from celery.worker.consumer.consumer import Consumer
from worker.__main__ import main

def start(self):
    raise AttributeError("'NoneType' object has no attribute 'hostname'")  # as kombu does

Consumer.start = start
main(sys.argv[1:])
"""


def test_an_unrecoverable_error_exits_non_zero_and_is_restarted(
    stack_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in stack_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(respawn_module, "FIRST_DELAY_S", 0.05)
    script = tmp_path / "unrecoverable.py"
    script.write_text(UNRECOVERABLE)
    log = tmp_path / "log"
    with log.open("wb") as out:
        direct = subprocess.run(
            [sys.executable, str(script), "celery-worker"], cwd=ROOT, stdout=out, stderr=out
        )
    assert direct.returncode == 1  # Celery's own entry point would have exited 0
    assert "Unrecoverable error" in log.read_text()
    monkeypatch.chdir(ROOT)
    assert respawn([sys.executable, str(script), "celery-worker"]) == 1  # tried, then given up
