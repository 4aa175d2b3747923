"""The worker imports its configured provider's SDK before it freezes its start-up heap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import gc, json, sys
from worker.providers.registry import preload
before = "openai" in sys.modules, len(gc.get_objects())
preload("nonesuch")  # an unknown name is the first call's error to report, not this one's
preload("openai")
print(json.dumps([*before, "openai" in sys.modules, len(gc.get_objects())]))
"""


def test_preloading_the_openai_provider_imports_its_sdk_ahead_of_the_first_call() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    had_sdk, objects_before, has_sdk, objects_after = json.loads(done.stdout)
    assert (had_sdk, has_sdk) == (False, True)
    assert objects_after - objects_before > 20_000  # what the heap freeze now takes in
