"""Settings from the environment: path lists as people type them, and every bad value one line
that names its variable (never a pydantic traceback, never the value of a secret)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from shared.errors import SettingsError
from shared.settings import load_settings
from tests.stack import SIGNOFF


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/srv/a", (Path("/srv/a"),)),
        ("/srv/a:/srv/b", (Path("/srv/a"), Path("/srv/b"))),
        ("/srv/a::/srv/b:", (Path("/srv/a"), Path("/srv/b"))),
        (json.dumps(["/srv/a", "/srv/b"]), (Path("/srv/a"), Path("/srv/b"))),
        ("", ()),
    ],
)
def test_workspace_roots_take_a_path_list_or_json(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: tuple[Path, ...]
) -> None:
    monkeypatch.setenv("SIGNOFF_WORKSPACE_ROOTS", raw)
    assert load_settings().workspace_roots == expected


def test_broken_json_in_workspace_roots_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_WORKSPACE_ROOTS", '["/srv/a",')
    with pytest.raises(SettingsError, match=r"^invalid settings: SIGNOFF_WORKSPACE_ROOTS: "):
        load_settings()


def test_a_variable_that_must_be_json_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_RATE_LIMITS", "openai=500")
    with pytest.raises(
        SettingsError, match=r"^invalid settings: SIGNOFF_RATE_LIMITS: must be JSON"
    ):
        load_settings()


def test_a_bad_value_inside_a_variable_names_the_variable_and_the_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIGNOFF_RATE_LIMITS", json.dumps({"openai": {"burst_s": -1}}))
    with pytest.raises(SettingsError, match=r"SIGNOFF_RATE_LIMITS \(openai\.burst_s\): "):
        load_settings()


@pytest.mark.parametrize("password", ["short", "1234567"])
def test_a_short_admin_password_is_named_without_its_value(
    monkeypatch: pytest.MonkeyPatch, password: str
) -> None:
    monkeypatch.setenv("SIGNOFF_ADMIN_PASSWORD", password)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert message == (
        "invalid settings: SIGNOFF_ADMIN_PASSWORD: must be at least 8 characters "
        "(or empty: no admin)"
    )


def test_an_admin_password_of_8_characters_or_none_is_fine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIGNOFF_ADMIN_PASSWORD", "12345678")
    assert load_settings().admin_password.get_secret_value() == "12345678"
    monkeypatch.setenv("SIGNOFF_ADMIN_PASSWORD", "")
    assert load_settings().admin_password.get_secret_value() == ""


@pytest.mark.parametrize("command", ["up", "web", "worker"])
@pytest.mark.parametrize(
    ("variable", "value"),
    [("SIGNOFF_WORKSPACE_ROOTS", "[/srv/a"), ("SIGNOFF_RATE_LIMITS", "{oops")],
)
def test_the_cli_prints_one_line_naming_the_variable(
    tmp_path: Path, command: str, variable: str, value: str
) -> None:
    result = subprocess.run(
        [SIGNOFF, command],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", variable: value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: invalid settings: {variable}: ")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
