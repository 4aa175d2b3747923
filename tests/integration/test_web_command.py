"""`signoff web`: gunicorn with several workers; a session made by one worker works on all."""

from __future__ import annotations

import http.cookiejar
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from shared.embedded_redis import EmbeddedRedis, free_port
from tests.stack import ROOT

SIGNOFF = str(Path(sys.executable).with_name("signoff"))


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
