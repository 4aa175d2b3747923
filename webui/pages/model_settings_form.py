"""The model settings and context size of a form, read as the API takes them.

A field left empty is unset (the provider's or the settings' default). A number that is not
one, a `stop` past its limit or an `extra` that is not a JSON object is InvalidInput naming the
field; the ranges are the models' own (`ModelSettings`, `AgentOptions.context_tokens`).
"""

from __future__ import annotations

import json
from typing import Any

from werkzeug.datastructures import MultiDict

from shared.errors import InvalidInput

__all__ = ["FIELDS", "model_fields"]

_WHOLE = ("max_output_tokens", "seed")
_REAL = ("temperature", "top_p")
_CHOICE = ("reasoning_effort",)
FIELDS = (
    "context_tokens",
    *_WHOLE,
    *_REAL,
    "stop",
    *_CHOICE,
    "parallel_tool_calls",
    "extra",
)


def model_fields(form: MultiDict[str, str]) -> dict[str, Any]:
    """`context_tokens` and `model_settings` from the form (None: left empty)."""
    text = {name: form.get(name, "").strip() for name in FIELDS}
    chosen: dict[str, Any] = {name: _whole(name, text[name]) for name in _WHOLE if text[name]}
    chosen |= {name: _real(name, text[name]) for name in _REAL if text[name]}
    chosen |= {name: text[name] for name in _CHOICE if text[name]}
    stops = [line for line in form.get("stop", "").splitlines() if line]
    if stops:
        chosen["stop"] = stops
    if text["parallel_tool_calls"]:
        chosen["parallel_tool_calls"] = _yes_no(text["parallel_tool_calls"])
    if text["extra"]:
        chosen["extra"] = _json_object("extra", text["extra"])
    context = text["context_tokens"]
    return {
        "context_tokens": _whole("context_tokens", context) if context else None,
        "model_settings": chosen or None,
    }


def _whole(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(f"{name}: {raw!r} is not a whole number") from None


def _real(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise InvalidInput(f"{name}: {raw!r} is not a number") from None


def _yes_no(raw: str) -> bool:
    if raw not in ("true", "false"):
        raise InvalidInput(f"parallel_tool_calls: {raw!r} is neither true nor false")
    return raw == "true"


def _json_object(name: str, raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidInput(f'{name}: a JSON object, as {{"top_k": 40}}')
    return value
