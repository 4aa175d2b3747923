"""The worker's logging set-up: records name no thread (a gevent task is a greenlet, and
naming one made a dummy Thread for every line)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from celery.signals import after_setup_logger, after_setup_task_logger

from shared.settings import Settings
from worker.celery_logs import adopt_celery_logging


@pytest.fixture
def logging_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(logging, "logThreads", True)
    for signal in (after_setup_logger, after_setup_task_logger):
        monkeypatch.setattr(signal, "connect", lambda *_, **__: None)  # no Celery starts here
    yield
    logging.captureWarnings(False)


def test_records_of_an_adopted_worker_name_no_thread(logging_state: None) -> None:
    before = logging.getLogger("t").makeRecord("t", logging.INFO, "f", 1, "m", None, None)
    assert before.threadName is not None
    adopt_celery_logging(Settings(), "worker")
    after = logging.getLogger("t").makeRecord("t", logging.INFO, "f", 1, "m", None, None)
    assert after.threadName is None and after.thread is None
    assert after.getMessage() == "m"
