"""The worker app builds its (disabled) result backend once, not once per thread or greenlet."""

from __future__ import annotations

import threading

import gevent

from shared.settings import Settings
from worker.app import create_celery


def test_one_result_backend_for_every_thread_and_greenlet(settings: Settings) -> None:
    app = create_celery(settings)
    seen = [app.backend]
    thread = threading.Thread(target=lambda: seen.append(app.backend))
    thread.start()
    thread.join()
    seen.append(gevent.spawn(lambda: app.backend).get())  # as each task of the gevent pool
    assert all(backend is seen[0] for backend in seen)
    assert app.conf.task_ignore_result  # results stay ignored
