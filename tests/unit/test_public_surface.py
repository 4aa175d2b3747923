"""The public surface is declared, importable, and documented where it is generated."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

import shared
from docs.update_readme import README, rendered

MODULES = [
    "shared",
    "shared.errors",
    "shared.models.steps",
    "shared.models.content",
    "shared.models.chunks",
    "shared.models.events",
    "shared.settings",
    "shared.store.history",
    "shared.client",
    "shared.client.aio",
    "shared.models.config",
    "shared.client.follow",
    "shared.client.drivers",
    "shared.workspace",
    "worker.tools",
    "worker.providers.base",
]


@pytest.mark.parametrize("name", MODULES)
def test_every_declared_name_exists(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__, f"{name} declares no public names"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing


def test_top_level_exports_exactly_the_client_surface() -> None:
    public = {
        n
        for n, v in vars(shared).items()
        if not n.startswith("_") and not inspect.ismodule(v) and n != "annotations"
    }
    assert public == set(shared.__all__)


def test_every_error_class_says_when_it_is_raised() -> None:
    from shared import errors

    for name in errors.__all__:
        doc = getattr(errors, name).__doc__ or ""
        assert doc.startswith("Raised "), name


def test_readme_configuration_table_is_generated_from_settings() -> None:
    text = README.read_text()
    assert rendered(text) == text, "README's settings table is stale: run `make docs`"


def test_no_pickle_anywhere() -> None:
    root = Path(__file__).resolve().parents[2]
    offenders = [
        str(path.relative_to(root))
        for package in ("shared", "worker", "webui")
        for path in (root / package).rglob("*.py")
        if "import pickle" in path.read_text() or "pickle." in path.read_text()
    ]
    assert offenders == []
