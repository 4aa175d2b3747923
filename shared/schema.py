"""Checking JSON against a JSON schema, reporting every violation with its path."""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from shared.errors import InvalidInput

__all__ = ["check_schema", "parse_json_answer", "schema_violations"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def check_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Rejects a schema that is not valid JSON Schema (2020-12)."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise InvalidInput(f"response schema is not a valid JSON schema: {exc.message}") from exc
    return schema


def schema_violations(instance: Any, schema: dict[str, Any]) -> list[str]:
    """Every violation as '$.path: message', sorted; empty when the instance is valid."""
    validator = Draft202012Validator(schema)
    return sorted(
        f"{error.json_path}: {error.message}" for error in validator.iter_errors(instance)
    )


def parse_json_answer(text: str) -> Any:
    """Reads a model's JSON answer, tolerating a Markdown code fence around it."""
    match = _FENCE.match(text)
    return json.loads(match[1] if match else text)
