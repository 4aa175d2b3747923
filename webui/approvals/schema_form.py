"""A form built from a JSON schema, for operators answering `Submit` notifications. Pure.

Flat object schemas (string, number, integer, boolean and enum properties) become
one input per property; anything else is answered as JSON in a textarea.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.errors import InvalidInput

__all__ = ["FormField", "form_fields", "read_fields", "read_json_field"]

_SIMPLE = {"string", "number", "integer", "boolean"}


@dataclass(frozen=True)
class FormField:
    name: str
    kind: str  # string, number, integer, boolean or enum
    required: bool
    title: str
    description: str = ""
    options: tuple[str, ...] = ()


def _field(name: str, spec: Any, required: bool) -> FormField | None:
    if not isinstance(spec, dict):
        return None
    title, description = str(spec.get("title") or name), str(spec.get("description") or "")
    if isinstance(spec.get("enum"), list) and all(isinstance(v, str) for v in spec["enum"]):
        return FormField(name, "enum", required, title, description, tuple(spec["enum"]))
    kind = spec.get("type")
    if kind in _SIMPLE:
        return FormField(name, str(kind), required, title, description)
    return None


def form_fields(schema: Mapping[str, Any] | None) -> list[FormField] | None:
    """One field per property of a flat object schema; None when the schema is not flat."""
    if (
        not schema
        or schema.get("type") != "object"
        or not isinstance(schema.get("properties"), dict)
    ):
        return None
    required = set(schema.get("required") or ())
    fields = [_field(name, spec, name in required) for name, spec in schema["properties"].items()]
    return None if any(f is None for f in fields) else [f for f in fields if f is not None]


def _value(field: FormField, raw: str) -> Any:
    if field.kind == "boolean":
        return raw == "on"
    if field.kind in ("number", "integer"):
        try:
            return int(raw) if field.kind == "integer" else float(raw)
        except ValueError:
            raise InvalidInput(f"{field.title} must be a {field.kind}, got {raw[:30]!r}") from None
    return raw


def read_fields(fields: list[FormField], form: Mapping[str, str]) -> dict[str, Any]:
    """The submitted object; empty optional fields are left out (the schema checks the rest)."""
    answer: dict[str, Any] = {}
    for field in fields:
        raw = form.get(f"field.{field.name}", "")
        if raw == "" and field.kind != "boolean" and not field.required:
            continue
        answer[field.name] = _value(field, raw)
    return answer


def read_json_field(form: Mapping[str, str], name: str, what: str) -> Any:
    try:
        return json.loads(form.get(name, ""))
    except ValueError as exc:
        raise InvalidInput(f"{what} is not valid JSON: {exc}") from None
