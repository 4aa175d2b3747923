"""deploy/: the alert rules and the Grafana dashboard load as they are, and name only series
Signoff exports (a renamed series fails here, not on an operator's screen)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from prometheus_client import REGISTRY

from shared.metrics import (
    series,  # noqa: F401  (registers every series)
    state,
)

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
SCRAPE = ROOT / "deploy" / "prometheus" / "prometheus.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "signoff.json"

# What Grafana's file provisioning reads of a dashboard, as a JSON Schema.
DASHBOARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title", "uid", "schemaVersion", "panels"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,40}$"},
        "schemaVersion": {"type": "integer", "minimum": 30},
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "type", "title", "gridPos", "targets"],
                "properties": {
                    "type": {"enum": ["timeseries", "stat", "bargauge", "gauge", "table"]},
                    "gridPos": {
                        "type": "object",
                        "required": ["x", "y", "w", "h"],
                        "properties": {
                            "x": {"type": "integer", "minimum": 0, "maximum": 23},
                            "w": {"type": "integer", "minimum": 1, "maximum": 24},
                        },
                    },
                    "targets": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["refId", "expr"],
                            "properties": {"expr": {"type": "string", "minLength": 1}},
                        },
                    },
                },
            },
        },
    },
}


def exported() -> set[str]:
    """Every series name a Signoff process can expose (samples of histograms included)."""
    names = {"up"}
    for family in REGISTRY.collect():
        if family.name.startswith("signoff_"):
            base = family.name + ("_total" if family.type == "counter" else "")
            names |= {base, f"{family.name}_bucket", f"{family.name}_count", f"{family.name}_sum"}
    source = (ROOT / "shared" / "metrics" / "state.py").read_text()
    names |= set(re.findall(r'"(signoff_[a-z_]+)"', source))
    assert state.StateCollector  # the module the gauges come from
    return names


def referenced(expr: str) -> set[str]:
    return set(re.findall(r"\b(signoff_[a-z_]+|up)\b(?=\s*[{\[)\s]|$)", expr))


def test_alert_rules_name_only_exported_series() -> None:
    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules} >= {
        "SignoffApprovalsWaiting",
        "SignoffTurnFailureRate",
        "SignoffQueueBacklog",
        "SignoffWorkerDown",
        "SignoffBeatDown",
        "SignoffWebhookFailures",
        "SignoffBudgetNearlySpent",
    }
    known = exported()
    for rule in rules:
        names = referenced(rule["expr"])
        assert names and names <= known, (rule["alert"], names - known)
        assert rule["labels"]["severity"] in ("warning", "critical")


def test_dashboard_loads_and_names_only_exported_series() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    jsonschema.validate(dashboard, DASHBOARD_SCHEMA)
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    known = exported()
    for panel in dashboard["panels"]:
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        for target in panel["targets"]:
            names = referenced(target["expr"])
            assert names and names <= known, (panel["title"], names - known)


def test_scrape_config_names_the_jobs_the_alerts_expect() -> None:
    jobs = {job["job_name"] for job in yaml.safe_load(SCRAPE.read_text())["scrape_configs"]}
    assert jobs == {"signoff-web", "signoff-worker", "signoff-beat"}
    assert all(f'job="{job}"' in ALERTS.read_text() for job in jobs - {"signoff-web"})


def test_promtool_accepts_the_rules() -> None:
    """Prometheus's own checker (Debian's `prometheus` package, .ci/system-packages)."""
    assert shutil.which("promtool"), "promtool is missing: apt-get install prometheus"
    result = subprocess.run(
        ["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_collector_passes_traces_on() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "otel" / "collector.yml").read_text())
    pipeline = config["service"]["pipelines"]["traces"]
    assert set(pipeline["receivers"]) <= set(config["receivers"])
    assert set(pipeline["exporters"]) <= set(config["exporters"])
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
