"""`signoff web`: gunicorn with several workers; a session made by one worker works on all."""

from __future__ import annotations

import http.cookiejar
import os
import re
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from shared.local.embedded_redis import EmbeddedRedis, free_port
from shared.store.users import TokenStore
from tests.stack import ROOT, SIGNOFF, state_store


def wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, "signoff web exited"
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("signoff web did not answer")


def test_signoff_web_keeps_sessions_across_its_workers(redis_server: EmbeddedRedis) -> None:
    port = free_port()
    env = {
        **os.environ,
        "SIGNOFF_REDIS_URL": redis_server.url,
        "SIGNOFF_KEY_PREFIX": "webcmd",
        "SIGNOFF_WEB_PORT": str(port),
        "SIGNOFF_WEB_WORKERS": "3",
        "SIGNOFF_WEB_THREADS": "4",
        "SIGNOFF_ADMIN_PASSWORD": "correct horse battery",
    }
    env.pop("SIGNOFF_SECRET_KEY", None)
    web = subprocess.Popen(
        [SIGNOFF, "web"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, web)
        environ = Path(f"/proc/{web.pid}/environ").read_bytes().split(b"\0")
        secret = next(v for v in environ if v.startswith(b"SIGNOFF_SECRET_KEY="))
        assert len(secret) > len("SIGNOFF_SECRET_KEY=") + 20  # one key, inherited by every worker
        browser = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        form = browser.open(f"{url}/sign-in").read().decode()
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', form)[1]  # type: ignore[index]
        fields = {"username": "admin", "password": "correct horse battery", "csrf_token": csrf}
        browser.open(f"{url}/sign-in", data=urllib.parse.urlencode(fields).encode())
        pages = [browser.open(f"{url}/conversations") for _ in range(8)]
        assert all(
            page.geturl().endswith("/conversations") and page.status == 200 for page in pages
        )
    finally:
        web.terminate()
        _, errors = web.communicate(timeout=30)
    assert b"SIGNOFF_SECRET_KEY is not set; sessions end when the server restarts" in errors


# --- `signoff web` on a shared host: a short admin password, the control socket, orphans ---


def test_a_short_admin_password_stops_signoff_web_before_gunicorn(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "SIGNOFF_ADMIN_PASSWORD": "s3cret"}
    result = subprocess.run(
        [SIGNOFF, "web"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr == (
        "error: invalid settings: SIGNOFF_ADMIN_PASSWORD: must be at least 8 characters "
        "(or empty: no admin)\n"
    )
    assert "gunicorn" not in result.stdout + result.stderr  # never started
    assert "s3cret" not in result.stdout + result.stderr


def _web_pids(master: int) -> set[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return {int(pid) for pid in children}


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_signoff_web_makes_no_control_socket_and_its_workers_die_with_it(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "XDG_"))}
    env.update(
        {
            k: v
            for k, v in os.environ.items()
            if k in ("SIGNOFF_REDIS_CLUSTER", "SIGNOFF_BROKER_URL")
        },
        HOME=str(tmp_path),
        SIGNOFF_REDIS_URL=redis_server.url,
        SIGNOFF_KEY_PREFIX="webcmd2",
        SIGNOFF_WEB_PORT=str(port),
        SIGNOFF_WEB_WORKERS="2",
        SIGNOFF_SECRET_KEY="x" * 32,
    )
    web = subprocess.Popen(
        [SIGNOFF, "web"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    streams = []
    try:
        wait_healthy(url, web)
        assert not (tmp_path / ".gunicorn").exists()  # no socket shared by every instance
        deadline = time.monotonic() + 30
        while len(_web_pids(web.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)  # the first worker may answer while the second still boots
        token = TokenStore(*state_store(redis_server.url, "webcmd2")).create("test", "viewer")
        for _ in range(4):  # open event streams keep a worker busy: it would linger 30 s
            request = urllib.request.Request(
                f"{url}/api/v1/events", headers={"Authorization": f"Bearer {token}"}
            )
            streams.append(urllib.request.urlopen(request, timeout=10))
        workers = _web_pids(web.pid)
        assert len(workers) == 2
        web.kill()  # `signoff web` is the gunicorn master: SIGKILLed, it cleans nothing up
        web.wait()
        deadline = time.monotonic() + 5
        while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_running(pid) for pid in workers)
    finally:
        for stream in streams:
            stream.close()
        if web.poll() is None:
            web.kill()
            web.wait()
