"""The model-settings options every command that runs a model takes, read into one mapping."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from shared.errors import InvalidInput
from shared.models.model_settings import ReasoningEffort

__all__ = ["model_settings_from", "model_settings_options"]

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = [
    click.option("--max-output-tokens", type=int, default=None, help="At most this many tokens."),
    click.option("--temperature", type=float, default=None, help="Sampling temperature (0-2)."),
    click.option("--top-p", "top_p", type=float, default=None, help="Nucleus sampling (0-1]."),
    click.option("--stop", "stop", multiple=True, help="A stop string (up to 4)."),
    click.option("--seed", type=int, default=None, help="Sampling seed."),
    click.option(
        "--reasoning-effort", type=click.Choice([e.value for e in ReasoningEffort]), default=None
    ),
    click.option(
        "--parallel-tool-calls/--no-parallel-tool-calls",
        "parallel_tool_calls",
        default=None,
        help="Whether the model may call several tools at once.",
    ),
    click.option(
        "--model-setting",
        "extra",
        multiple=True,
        metavar="KEY=JSON",
        help="Passed to the provider as is (a JSON value, or plain text).",
    ),
]
_NAMES = ("max_output_tokens", "temperature", "top_p", "stop", "seed")
_NAMES_MORE = ("reasoning_effort", "parallel_tool_calls", "extra")


def model_settings_options(command: F) -> F:
    """Adds the model-settings options to a click command."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def model_settings_from(values: dict[str, Any]) -> dict[str, Any] | None:
    """Pops the options from a command's keywords: the settings chosen, or None when none."""
    chosen = {name: values.pop(name) for name in (*_NAMES, *_NAMES_MORE)}
    chosen["stop"] = list(chosen["stop"]) or None
    chosen["extra"] = _extra(chosen["extra"])
    kept = {name: value for name, value in chosen.items() if value is not None}
    return kept or None


def _extra(pairs: tuple[str, ...]) -> dict[str, Any] | None:
    found: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise InvalidInput(f"--model-setting {pair!r}: write KEY=JSON")
        try:
            found[key] = json.loads(raw)
        except ValueError:
            found[key] = raw
    return found or None
