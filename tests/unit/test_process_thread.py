"""The per-process background thread: started once, again after it ended or after a fork."""

from __future__ import annotations

import os
import threading

import pytest

from worker.process_thread import ProcessThread


def _counting_thread() -> tuple[ProcessThread, threading.Condition, list[int]]:
    lock, runs = threading.Condition(), []
    thread = ProcessThread("test-thread", lambda: runs.append(os.getpid()), lock)
    return thread, lock, runs


def test_a_running_thread_is_not_started_twice() -> None:
    release = threading.Event()
    lock, starts = threading.Condition(), []
    thread = ProcessThread("test-thread", lambda: (starts.append(1), release.wait(5)), lock)
    with lock:
        assert thread.ensure_running() is True
        assert thread.ensure_running() is False
        assert thread.ensure_running() is False
    release.set()
    for _ in range(500):
        with lock:
            if thread._pid is None:
                break
        threading.Event().wait(0.01)
    assert starts == [1]


def test_a_thread_that_ended_is_started_again() -> None:
    thread, lock, runs = _counting_thread()
    with lock:
        assert thread.ensure_running() is True
    for _ in range(500):
        if runs:
            break
        threading.Event().wait(0.01)
    for _ in range(500):
        with lock:
            if thread._pid is None:
                assert thread.ensure_running() is True
                break
        threading.Event().wait(0.01)
    for _ in range(500):
        if len(runs) == 2:
            break
        threading.Event().wait(0.01)
    assert runs == [os.getpid(), os.getpid()]


def test_a_forked_child_starts_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    lock = threading.Condition()
    thread = ProcessThread("test-thread", lambda: release.wait(5), lock)
    with lock:
        assert thread.ensure_running() is True
        parent = os.getpid()
        # a child inherits the object, not the thread: its pid differs
        monkeypatch.setattr(os, "getpid", lambda: parent + 1)
        assert thread.ensure_running() is True
        assert thread.ensure_running() is False
    release.set()
