"""The fault suite at its CI size: `python -m faults --quick` holds every invariant.

Its own processes (redis-server with AOF, workers, a beat, `signoff web`) are started and
killed by the suite itself; this test only runs it and reads its results.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.stack import ROOT

# one Redis: restarts and cuts the one Redis
pytestmark = [pytest.mark.integration, pytest.mark.one_redis]

RUN_TIMEOUT_S = 220
INVARIANTS = ["lost", "duplicated", "tools_twice", "stranded", "usage_twice"]


@pytest.mark.timeout(RUN_TIMEOUT_S + 20)
def test_the_quick_fault_suite_holds_every_invariant(tmp_path: Path) -> None:
    doc, results = tmp_path / "reliability.md", tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "faults", "--quick", "--doc", str(doc), "--json", str(results)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert run.returncode == 0, f"{run.stdout[-6000:]}\n{run.stderr[-6000:]}"

    found = {r["name"]: r for r in json.loads(results.read_text())}
    assert sorted(found) == sorted(
        ["kill storm", "Redis SIGKILL mid-batch", "concurrent resolves", "expiry with no worker"]
    )
    for result in found.values():
        assert result["passed"] and not result["failures"], result
        assert all(result[name] == 0 for name in INVARIANTS), result
        assert result["turns"] > 0, result
    assert found["kill storm"]["kills"] >= 1
    assert found["Redis SIGKILL mid-batch"]["kills"] >= 1
    assert found["concurrent resolves"]["http_5xx"] == 0
    assert found["concurrent resolves"]["winners"] == 0
    assert found["expiry with no worker"]["late"] == 0

    table = doc.read_text()
    assert "<!-- faults:quick -->" in table and "python -m faults --quick" in table
    assert "**FAIL**" not in table
