"""The browser tests' fixtures: a live server on the module's worker, an API client, Chromium."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from shared.models.users import Role
from shared.settings import Settings
from tests.stack import WorkerProcess
from tests.web.browser.kit import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, LiveServer, signed_in
from tests.web.conftest import OPERATOR, SECRET


@pytest.fixture(scope="module")
def server(
    stack_env: dict[str, str], worker: WorkerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    settings = Settings(
        redis_url=stack_env["SIGNOFF_REDIS_URL"],
        key_prefix=stack_env["SIGNOFF_KEY_PREFIX"],
        secret_key=SECRET,
        sse_heartbeat_s=1.0,
        archive_dir=str(tmp_path_factory.mktemp("archive")),
    )
    with LiveServer(settings) as live:
        live.services.users.add(*OPERATOR)
        yield live


@pytest.fixture(scope="module")
def api(server: LiveServer) -> Iterator[httpx.Client]:
    token = server.services.tokens.create("browser tests", Role.SUBMITTER)
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as client:
        yield client


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser, server: LiveServer) -> Iterator[Page]:
    with signed_in(browser, server) as tab:
        yield tab
