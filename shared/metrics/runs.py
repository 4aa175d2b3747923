"""Each run of the web, the worker and beat keeps its metrics in a directory of its own.

prometheus-client's multiprocess mode: every process of a run (gunicorn's workers, the
worker's two Celery children, beat) writes its values to files in the run's directory,
and whoever is scraped adds them up. The directory is made fresh by the run's first
process (the gunicorn master, `signoff worker`'s respawning parent, beat) before any
value is recorded, passed to its children in `PROMETHEUS_MULTIPROC_DIR`, and removed
when it stops; a run that was killed leaves its directory behind, and the next run
under the same base removes it once its process is gone. So a restart starts from
zero, as Prometheus expects of a restarted target, and a child restarted within a run
keeps counting where its run was.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from shared.settings import Settings

__all__ = ["ENV", "RunDir", "base_dir", "registry", "render"]

ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus-client's own variable


def base_dir(settings: Settings) -> Path:
    """Where runs keep their directories."""
    if settings.metrics_dir:
        return Path(settings.metrics_dir)
    return Path(tempfile.gettempdir()) / f"signoff-metrics-{os.getuid()}"


class RunDir:
    """This run's directory: made (and given to prometheus-client) by `open`, gone at `close`."""

    def __init__(self, settings: Settings, role: str) -> None:
        self.base = base_dir(settings)
        self.role = role
        self.path = self.base / f"{role}-{os.getpid()}"

    def open(self) -> RunDir:
        """Makes the directory empty and points this process, and its children, at it."""
        self.base.mkdir(parents=True, exist_ok=True, mode=0o700)
        _remove_dead_runs(self.base)
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(mode=0o700)
        os.environ[ENV] = str(self.path)
        _use_files()
        return self

    def close(self) -> None:
        if os.environ.get(ENV) == str(self.path):
            del os.environ[ENV]
            _use_files()  # values made from now on live in memory again, not in a gone directory
        shutil.rmtree(self.path, ignore_errors=True)


def _use_files() -> None:
    """prometheus-client chooses where values live when it is imported: if it was imported
    before the directory was known, choose again. Safe because every series is labelled
    (`shared/metrics/series.py`), so no value exists before its first use."""
    values = sys.modules.get("prometheus_client.values")
    if values is not None:
        values.ValueClass = values.get_value_class()  # type: ignore[attr-defined]


def _remove_dead_runs(base: Path) -> None:
    """Directories of runs whose first process is gone (killed: it could not remove them)."""
    for entry in base.iterdir():
        _, _, pid = entry.name.rpartition("-")
        if entry.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def registry(*extra: Collector) -> CollectorRegistry:
    """A registry of every process of the run (this one alone, outside a run) and `extra`."""
    from prometheus_client import multiprocess

    chosen = CollectorRegistry(auto_describe=True)
    path = os.environ.get(ENV)
    if path:
        multiprocess.MultiProcessCollector(chosen, path=path)
    else:
        chosen.register(_ThisProcess())
    for collector in extra:
        chosen.register(collector)
    return chosen


class _ThisProcess(Collector):
    """The series this process recorded (the library's default registry), outside a run."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()

    def describe(self) -> Iterable[Metric]:
        return ()


def render(*extra: Collector) -> tuple[bytes, str]:
    """The text exposition of `registry(*extra)`, and its content type."""
    return generate_latest(registry(*extra)), CONTENT_TYPE_LATEST
