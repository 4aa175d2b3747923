"""`signoff up --demo`: everything starts, the demo batch runs with approvals resolved through
the API, results are written, and Ctrl-C leaves no process behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import redis

from shared.embedded_redis import free_port
from shared.keys import KeySpace
from shared.users import TokenStore
from tests.stack import ROOT

SIGNOFF = str(Path(sys.executable).with_name("signoff"))


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


def read_until(process: subprocess.Popen[str], marker: str, timeout_s: float = 90) -> str:
    assert process.stdout is not None
    seen, deadline = "", time.monotonic() + timeout_s
    while marker not in seen:
        assert time.monotonic() < deadline, seen
        line = process.stdout.readline()
        assert line or process.poll() is None, seen
        seen += line
    return seen


def processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and "pytest" not in cmdline:
            found.append(cmdline)
    return found


def test_up_demo_runs_the_batch_and_stops_cleanly(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    port = free_port()
    env = {
        **os.environ,
        "SIGNOFF_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        "COLUMNS": "250",
        "SIGNOFF_KEY_PREFIX": "updemo",
        "PYTHONPATH": str(ROOT),
    }
    up = subprocess.Popen(
        [SIGNOFF, "up", "--demo", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        banner = read_until(up, "need an operator")
        assert "starting one" in banner and f"http://127.0.0.1:{port}" in banner
        redis_url = re.search(r"redis: (\S+)", banner)[1]  # type: ignore[index]
        token = TokenStore(
            redis.Redis.from_url(redis_url, decode_responses=True), KeySpace("updemo")
        ).create("test", "operator")
        base = f"http://127.0.0.1:{port}/api/v1"
        resolved = 0
        deadline = time.monotonic() + 60
        while resolved < 3 and time.monotonic() < deadline:
            for note in api(f"{base}/notifications", token)["items"]:  # type: ignore[index]
                body = (
                    {"kind": "submit", "content": {"budget": 1000}}
                    if note["question"]
                    else {"kind": "allow"}
                )
                api(f"{base}/notifications/{note['id']}/resolve", token, "POST", body)
                resolved += 1
            time.sleep(0.2)
        assert resolved == 3
        read_until(up, "results written")
        results = [
            json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()
        ]
        assert [r["id"] for r in results][:3] == ["greet", "math", "time"] and len(results) == 8
        assert all(r["status"] == "done" for r in results)
        assert "1000" in next(r for r in results if r["id"] == "budget")["text"]
        redis_address = redis_url.removeprefix("redis://").removesuffix("/0")
        assert processes_mentioning(redis_address)  # the embedded redis-server it started
    finally:
        os.killpg(up.pid, signal.SIGINT)
        up.wait(timeout=60)
    time.sleep(0.5)
    assert processes_mentioning(redis_address) == []
    assert processes_mentioning(f"127.0.0.1:{port}") == []
