"""The files a fresh machine starts from: the lock covers every dependency, every install uses
it, lint tools are bounded, and the system-package step installs or says exactly what to run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.stack import ROOT

LOCK = ROOT / "constraints.txt"


def pins() -> dict[str, str]:
    lines = (line.strip() for line in LOCK.read_text().splitlines())
    pairs = (line.split("==") for line in lines if line and not line.startswith("#"))
    return {canonicalize_name(name): version for name, version in pairs}


def requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    raw = [*project["dependencies"], *extras["dev"], *extras["realmodel"]]
    return [Requirement(line) for line in raw]


def test_the_lock_pins_every_dependency_within_its_range() -> None:
    locked = pins()
    for requirement in requirements():
        version = locked.get(canonicalize_name(requirement.name))
        assert version is not None, f"{requirement.name} is not in constraints.txt"
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)
    assert "pip" in locked and "signoff" not in locked


@pytest.mark.parametrize("name", ["ruff", "mypy"])
def test_lint_tools_are_bounded(name: str) -> None:
    requirement = next(r for r in requirements() if r.name == name)
    assert any(spec.operator == "<" for spec in requirement.specifier), requirement


def test_the_build_backend_is_bounded_and_takes_an_spdx_license() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (backend,) = (Requirement(r) for r in pyproject["build-system"]["requires"])
    assert backend.name == "setuptools" and {s.operator for s in backend.specifier} == {">=", "<"}
    assert not backend.specifier.contains("76.0")  # no SPDX `license` string before 77
    assert pyproject["project"]["license"] == "Apache-2.0"


def test_every_lua_script_ships_as_package_data() -> None:
    """Scripts are read at import (`shared.store.lua.lua_source`): a wheel needs every one."""
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = shipped["package-data"]
    scripts = sorted(ROOT.glob("*/lua/*.lua"))
    assert scripts
    for script in scripts:
        package = script.parts[-3]
        inside = script.relative_to(ROOT / package)
        assert any(inside.match(p) for p in patterns.get(package, [])), script


@pytest.mark.parametrize("target", ["run", "test", "test-rabbitmq", "install"])
def test_every_make_install_uses_the_lock(tmp_path: Path, target: str) -> None:
    venv = tmp_path / "venv"
    planned = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    installs = [line for line in planned.splitlines() if "pip install" in line]
    assert len(installs) >= 2, planned  # pip itself, then the project
    assert all("-c constraints.txt" in line for line in installs), installs
    assert f"bash .ci/system-packages {'run' if target == 'run' else 'test'}" in planned


def test_ci_runs_what_the_readme_says() -> None:
    commands = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    # the README's test commands, then the short fuzz run (docs/fuzzing.md) and nothing else
    assert [c.split("#")[0].strip() for c in commands[-4:]] == [
        "make test",
        "make test-rabbitmq",
        "make test-cluster",
        "make fuzz-quick",
    ], commands
    assert not any("apt-get" in line or "pip install" in line for line in commands)


def fake_bin(tmp_path: Path, uid: int) -> Path:
    """A PATH with python3, an `id` that says `uid`, and an apt-get that records its calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    for name, body in {
        "id": f"echo {uid}",
        "apt-get": f'echo "$*" >> {tmp_path / "apt.log"}',
    }.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def system_packages(bin_dir: Path, purpose: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(ROOT / ".ci" / "system-packages"), purpose],
        env={"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/")},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_missing_packages_are_installed_when_root(tmp_path: Path) -> None:
    result = system_packages(fake_bin(tmp_path, 0), "test")
    assert result.returncode == 0, result.stderr
    update, install = (tmp_path / "apt.log").read_text().splitlines()
    assert update == "update -qq"
    assert re.fullmatch(
        r"install -y -qq redis-server( chromium)? cmake g\+\+( prometheus)?( iproute2)?"
        r"( rabbitmq-server)?",
        install,
    ), install


def test_without_root_the_exact_command_is_printed(tmp_path: Path) -> None:
    result = system_packages(fake_bin(tmp_path, 1000), "run")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "missing system packages: redis-server. Install them, then run make again:",
        "    sudo apt-get update && sudo apt-get install -y redis-server",
    ]
    assert not (tmp_path / "apt.log").exists()
