"""Checking JSON against a user-supplied JSON schema, reporting every violation with its path.

Every user schema (a conversation's or a batch's response schema, the answer schema of
an `ask_operator` question) goes through `check_schema` when it enters and through
`schema_violations` when a value is checked against it: both use `UserSchemaValidator`
(patterns in re2, a budget of steps) and the bounds of `shared.schema.limits`, so no
schema can stall the worker that checks an answer against it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

from shared.errors import InvalidInput
from shared.schema.limits import (
    MAX_PATTERN_CHARS,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_EXPANSION,
    MAX_SCHEMA_PATTERNS,
    MAX_VALIDATION_STEPS,
    check_bounds,
)
from shared.schema.validator import (
    OverBudget,
    UserSchemaValidator,
    schema_format_checker,
    step_budget,
)

__all__ = [
    "MAX_PATTERN_CHARS",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_EXPANSION",
    "MAX_SCHEMA_PATTERNS",
    "MAX_VALIDATION_STEPS",
    "check_schema",
    "parse_json_answer",
    "schema_violations",
]

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def check_schema(schema: dict[str, Any], *, name: str = "response_schema") -> dict[str, Any]:
    """Rejects a schema that is not JSON Schema 2020-12 or breaks a bound; `name` is its field."""
    if not isinstance(schema, dict):
        raise InvalidInput(f"{name} must be a JSON object, not {type(schema).__name__}")
    check_bounds(schema, name=name)
    try:
        UserSchemaValidator.check_schema(schema, format_checker=schema_format_checker())
    except SchemaError as exc:
        raise InvalidInput(
            f"{name} is not a valid JSON schema at {exc.json_path}: {exc.message}"
        ) from exc
    return schema


def schema_violations(
    instance: Any, schema: dict[str, Any], *, name: str = "response_schema"
) -> list[str]:
    """Every violation as '$.path: message', sorted; empty when the instance is valid.

    The schema is checked first, so one stored before these bounds existed cannot stall
    the check either; a schema `check_schema` refuses is one violation at '$' that says why.
    """
    try:
        check_schema(schema, name=name)
    except InvalidInput as exc:
        return [f"$: {exc.message}"]
    # Without the top-level $schema, a `$ref` to "#" stays with this validator class.
    validator = UserSchemaValidator({k: v for k, v in schema.items() if k != "$schema"})
    try:
        with step_budget(MAX_VALIDATION_STEPS):
            errors = list(validator.iter_errors(instance))
    except OverBudget:
        return [
            f"$: checking the value against {name} took more than {MAX_VALIDATION_STEPS:,} "
            "steps (MAX_VALIDATION_STEPS); the schema repeats itself too often for this value"
        ]
    except RecursionError:
        return ["$: the value is nested too deeply to check against the schema"]
    except Unresolvable as exc:
        return [f"$: {name} has a $ref that cannot be resolved: {exc}"]
    return sorted(f"{error.json_path}: {error.message}" for error in errors)


def parse_json_answer(text: str) -> Any:
    """Reads a model's JSON answer, tolerating a Markdown code fence around it."""
    match = _FENCE.match(text)
    return json.loads(match[1] if match else text)
