"""`signoff up`: everything starts on its own Redis, the demo batch runs once per directory with
approvals resolved through the API, and however it is stopped (SIGINT even when ignored by the
shell, SIGTERM, SIGHUP, SIGKILL) no process it started is left. It refuses a taken port and a
directory that another `up` holds."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from shared.local.embedded_redis import EmbeddedRedis, free_port
from shared.store.keys import KeySpace
from shared.store.users import TokenStore
from tests.stack import ROOT

# one Redis: `signoff up` runs a Redis of its own
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]

BIN = Path(sys.executable).parent
SIGNOFF = str(BIN / "signoff")
STOP_WITHIN_S = 10


def up_env(**extra: str) -> dict[str, str]:
    """The caller's environment without SIGNOFF_ variables, nor the venv on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != BIN]
    return {
        **env,
        "PATH": os.pathsep.join(path),
        "COLUMNS": "250",
        "PYTHONPATH": str(ROOT),
        **extra,
    }


@dataclass
class Up:
    process: subprocess.Popen[str]
    banner: str = ""

    @property
    def pid(self) -> int:
        return self.process.pid

    def read_until(self, marker: str, timeout_s: float = 90) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        while marker not in self.banner:
            assert time.monotonic() < deadline, self.banner
            line = self.process.stdout.readline()
            assert line or self.process.poll() is None, self.banner
            self.banner += line
        return self.banner

    def found(self, pattern: str) -> str:
        match = re.search(pattern, self.banner)
        assert match, self.banner
        return match[1]

    @property
    def redis_url(self) -> str:
        return self.found(r"redis: (\S+)")


def start_up(cwd: Path, *args: str, preexec: Callable[[], None] | None = None, **env: str) -> Up:
    process = subprocess.Popen(
        [SIGNOFF, "up", *args],
        cwd=cwd,
        env=up_env(**env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # like a job of its own shell, without a terminal
        preexec_fn=preexec,
    )
    return Up(process)


@pytest.fixture
def started() -> Iterator[list[Up]]:
    """Every `up` a test starts; whatever a test leaves running is killed, then checked."""
    ups: list[Up] = []
    yield ups
    for up in ups:
        if up.process.poll() is None:
            up.process.kill()
        up.process.wait(timeout=30)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) of a live process; None when gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid, pgrp = raw[raw.rindex(")") + 2 :].split()[:3]
    return state, int(ppid), int(pgrp)


def tree(root: int) -> set[int]:
    """`root`'s descendants and the members of their process groups."""
    stats = {int(p.name): _stat(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit()}
    live = {pid: s for pid, s in stats.items() if s is not None}
    found = {root}
    while True:
        more = {pid for pid, (_, ppid, _) in live.items() if ppid in found} - found
        groups = {live[pid][2] for pid in more if pid in live}
        more |= {pid for pid, (_, _, pgrp) in live.items() if pgrp in groups} - found
        if not more:
            return found - {root}
        found |= more


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def full_tree(root: int) -> set[int]:
    """`root`'s tree once gunicorn has both its workers: the banner may come before the second."""
    deadline = time.monotonic() + 30
    while True:
        members = tree(root)
        gunicorns = [pid for pid in members if b"gunicorn" in cmdline(pid)]
        if len(gunicorns) >= 3 or time.monotonic() > deadline:
            return members
        time.sleep(0.1)


def alive(pids: set[int]) -> set[int]:
    """Those still running; a zombie has ended, only its parent has not yet read its status."""
    return {pid for pid in pids if (stat := _stat(pid)) is not None and stat[0] != "Z"}


def assert_all_end(pids: set[int]) -> None:
    deadline = time.monotonic() + STOP_WITHIN_S
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid: cmdline(pid) for pid in alive(pids)}
    assert not left, f"still running {STOP_WITHIN_S}s later: {left}"


def api(url: str, token: str, method: str = "GET", body: object = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def operator_token(redis_url: str) -> str:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    return TokenStore(client, KeySpace("signoff")).create("test", "operator")


DEMO_APPROVALS = 4  # two emails, the budget question, and the MCP server's delete_note


def resolve_demo_approvals(base: str, token: str) -> list[str]:
    """Allows every demo approval (answers the question); the tools that asked."""
    resolved: list[str] = []
    deadline = time.monotonic() + 60
    while len(resolved) < DEMO_APPROVALS and time.monotonic() < deadline:
        for note in api(f"{base}/notifications", token)["items"]:  # type: ignore[index]
            body = (
                {"kind": "submit", "content": {"budget": 1000}}
                if note["question"]
                else {"kind": "allow"}
            )
            api(f"{base}/notifications/{note['id']}/resolve", token, "POST", body)
            resolved.append(note["tool_call"]["name"])
        time.sleep(0.2)
    assert len(resolved) == DEMO_APPROVALS
    return resolved


def ignore_sigint() -> None:
    """What a shell does to a job it starts in the background."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_up_demo_runs_the_batch_and_stops_cleanly(tmp_path: Path, started: list[Up]) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    port = free_port()
    up = start_up(tmp_path, "--demo", "--port", str(port), preexec=ignore_sigint)
    started.append(up)
    banner = up.read_until("need an operator")
    assert f"Signoff is up: http://127.0.0.1:{port}" in banner
    redis_url = up.redis_url
    assert f"(its own; data in {Path('.signoff') / 'redis'})" in banner
    members = tree(up.pid)
    assert any(b"redis-server" in cmdline(p) for p in members)

    assert "demo: MCP server notes is connected" in banner
    asked = resolve_demo_approvals(f"http://127.0.0.1:{port}/api/v1", operator_token(redis_url))
    assert "notes__delete_note" in asked and "notes__list_notes" not in asked
    up.read_until("results written")
    results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in results][:3] == ["greet", "math", "time"] and len(results) == 10
    assert all(r["status"] == "done" for r in results)
    assert "1000" in next(r for r in results if r["id"] == "budget")["text"]
    by_id = {r["id"]: r for r in results}
    assert "notes__list_notes returned" in by_id["notes-list"]["text"]
    assert "notes__delete_note returned" in by_id["notes-delete"]["text"]
    notes = json.loads((tmp_path / ".signoff" / "notes.json").read_text())
    assert "2" not in notes and "1" in notes  # the MCP server deleted exactly the one allowed

    members = full_tree(up.pid)
    os.kill(up.pid, signal.SIGINT)  # ignored by its parent shell, it still stops everything
    assert up.process.wait(timeout=60) == 0
    assert_all_end(members)
    redis_aof = tmp_path / ".signoff" / "redis" / "appendonlydir"
    assert redis_aof.is_dir() and any(redis_aof.iterdir())  # its own Redis, AOF on


def test_a_later_start_keeps_the_password_and_runs_no_second_demo(
    tmp_path: Path, started: list[Up]
) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    port = free_port()
    first = start_up(tmp_path, "--demo", "--port", str(port))
    started.append(first)
    first.read_until("need an operator")
    password, batch = first.found(r"with password (\S+)"), first.found(r"demo: batch (\S+) runs")
    assert "password" in first.found(r"\(kept in (\S+)\)")
    kept = tmp_path / ".signoff" / "admin-password"
    assert kept.read_text().strip() == password and kept.stat().st_mode & 0o777 == 0o600
    os.kill(first.pid, signal.SIGTERM)
    assert first.process.wait(timeout=60) == 0

    second = start_up(tmp_path, "--demo", "--port", str(port))
    started.append(second)
    second.read_until(f"demo: batch {batch} was submitted at an earlier start; following it")
    assert second.found(r"with password (\S+)") == password
    client = redis.Redis.from_url(second.redis_url, decode_responses=True)
    assert client.zcard(KeySpace("signoff").batches()) == 1
    token = operator_token(second.redis_url)
    notes = api(f"http://127.0.0.1:{port}/api/v1/notifications", token)["items"]  # type: ignore[index]
    assert len(notes) == DEMO_APPROVALS  # the first start's approvals, none added

    third = subprocess.run(
        [SIGNOFF, "up", "--port", str(free_port())],
        cwd=tmp_path,
        env=up_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert third.returncode == 1
    assert f"another `signoff up` (pid {second.pid}) runs on .signoff" in third.stderr
    os.kill(second.pid, signal.SIGTERM)
    assert second.process.wait(timeout=60) == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_up_leaves_no_process_however_it_is_stopped(
    tmp_path: Path, started: list[Up], signum: signal.Signals
) -> None:
    up = start_up(tmp_path, "--port", str(free_port()))
    started.append(up)
    up.read_until("Ctrl-C stops everything")
    members = full_tree(up.pid)
    names = b" ".join(cmdline(p) for p in members)
    for part in (b"redis-server", b"worker\0worker", b"worker\0beat", b"gunicorn"):
        assert part in names
    assert len(members) >= 7  # redis, worker, beat, gunicorn and its 2 workers, the group's sleep
    os.kill(up.pid, signum)
    up.process.wait(timeout=60)
    assert_all_end(members)


def test_up_refuses_a_taken_port_before_starting_anything(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [SIGNOFF, "up", "--port", str(port)],
            cwd=tmp_path,
            env=up_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert f"the web port 127.0.0.1:{port} is taken" in result.stderr
    assert "--port" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / ".signoff" / "redis").exists()  # no Redis was started


def test_a_shared_redis_is_used_only_when_named_and_must_answer(tmp_path: Path) -> None:
    nowhere = f"redis://:hunter2-secret@127.0.0.1:{free_port()}/0"
    result = subprocess.run(
        [SIGNOFF, "up", "--port", str(free_port())],
        cwd=tmp_path,
        env=up_env(SIGNOFF_REDIS_URL=nowhere),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "SIGNOFF_REDIS_URL: no Redis answers at redis://:***@127.0.0.1" in result.stderr
    assert "hunter2" not in result.stderr + result.stdout


def test_the_banner_says_how_to_use_the_cli_from_another_terminal(
    tmp_path: Path, started: list[Up]
) -> None:
    up = start_up(tmp_path, "--port", str(free_port()))
    started.append(up)
    up.read_until("Ctrl-C stops everything")
    activate = up.found(r"source (\S+)")
    assert Path(activate) == BIN / "activate"
    export = up.found(r"(export SIGNOFF_REDIS_URL=\S+)")
    # what the README's tour types, in a new shell where `signoff` is not on PATH
    tour = subprocess.run(
        ["bash", "-c", f"source {activate} && {export} && signoff doctor"],
        cwd=tmp_path,
        env=up_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tour.returncode == 0, tour.stdout + tour.stderr
    assert up.redis_url.removeprefix("redis://") in tour.stdout + tour.stderr
    os.kill(up.pid, signal.SIGTERM)
    assert up.process.wait(timeout=60) == 0


def test_with_a_broker_apart_the_banner_exports_it_and_a_prompt_from_the_cli_runs(
    tmp_path: Path, started: list[Up]
) -> None:
    """Without SIGNOFF_BROKER_URL the CLI would send into the state Redis, where no worker of
    this Signoff reads: the banner's tour must carry it."""
    with EmbeddedRedis() as broker:
        up = start_up(tmp_path, "--port", str(free_port()), SIGNOFF_BROKER_URL=broker.url)
        started.append(up)
        up.read_until("Ctrl-C stops everything")
        activate = up.found(r"source (\S+)")
        exports = [up.found(r"(export SIGNOFF_REDIS_URL=\S+)")]
        exports.append(up.found(r"(export SIGNOFF_BROKER_URL=\S+)"))
        assert exports[1] == f"export SIGNOFF_BROKER_URL={broker.url}"
        script = " && ".join([f"source {activate}", *exports, "echo hello | signoff chat"])
        tour = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=up_env(),
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert tour.returncode == 0, tour.stdout + tour.stderr
        assert "You said" in tour.stdout, tour.stdout
        os.kill(up.pid, signal.SIGTERM)
        assert up.process.wait(timeout=60) == 0


def test_a_child_that_dies_stops_the_rest_and_is_named(tmp_path: Path, started: list[Up]) -> None:
    up = start_up(tmp_path, "--port", str(free_port()))
    started.append(up)
    up.read_until("Ctrl-C stops everything")
    members = full_tree(up.pid)
    (worker,) = (p for p in members if b"worker\0worker" in cmdline(p))
    os.kill(worker, signal.SIGKILL)
    assert up.process.wait(timeout=60) == 1
    assert_all_end(members)
    assert up.process.stdout is not None
    rest = up.process.stdout.read()
    assert "error: worker was killed by SIGKILL, so everything stopped" in rest
    assert ".signoff/logs/worker.log" in rest
