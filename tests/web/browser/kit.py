"""What the browser tests share: the app on a live server, a signed-in page, screenshots."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, ConsoleMessage, Page, expect
from werkzeug.serving import make_server

from shared.local.embedded_redis import free_port
from shared.settings import Settings
from tests.stack import ROOT
from tests.web.conftest import OPERATOR
from webui import create_app
from webui.services import Services

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "test-artifacts"


class LiveServer:
    """The app on a real threaded WSGI server, in a background thread."""

    def __init__(self, settings: Settings) -> None:
        self.app = create_app(settings)
        self.services: Services = self.app.extensions["signoff"]
        self.port = free_port()
        self.server = make_server("127.0.0.1", self.port, self.app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.services.broadcaster.close()  # ends open event streams
        self.server.shutdown()
        self.server.server_close()
        self.services.close()


@contextmanager
def signed_in(
    browser: Browser, server: LiveServer, *, width: int = 1100, height: int = 900
) -> Iterator[Page]:
    """A page signed in as the operator; fails on any console error (CSP, a JS error)."""
    context = browser.new_context(viewport={"width": width, "height": height})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: keep_errors(m, errors))
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(f"{server.url}/conversations")
    expect(tab).to_have_url(f"{server.url}/sign-in?next=/conversations")
    tab.fill("input[name=username]", OPERATOR[0])
    tab.fill("input[name=password]", OPERATOR[1])
    tab.click("button[type=submit]")
    expect(tab).to_have_url(f"{server.url}/conversations")
    yield tab
    context.close()
    assert errors == []


def keep_errors(message: ConsoleMessage, errors: list[str]) -> None:
    if message.type == "error":
        errors.append(message.text)


def shot(page: Page, name: str) -> None:
    path: Path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 0


def new_conversation(api: httpx.Client, **options: Any) -> str:
    response = api.post("/api/v1/conversations", json=options)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
