"""Schemathesis hooks for `python -m fuzz.api` (loaded by schemathesis, in `.venv-fuzz`).

`response_schema` is a JSON Schema: the document declares it an object and names
Signoff's bounds in words (`shared.models.config.RESPONSE_SCHEMA`), because no JSON
Schema can say which objects are JSON Schemas within them (patterns in re2 syntax,
`$ref` that resolve). So a generated object there is a schema-valid value the server
rightly refuses; in the cases that must be accepted, it becomes one of these schemas.
Negative cases keep theirs.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object"},
    {"type": "string", "maxLength": 20, "pattern": "^[a-z]+$"},
    {
        "type": "object",
        "properties": {"answer": {"type": "integer"}, "why": {"$ref": "#/$defs/why"}},
        "required": ["answer"],
        "$defs": {"why": {"type": "string"}},
    },
]


def _options(path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """Where the options of a body sit, if they can hold a response schema."""
    if path == "/api/v1/conversations" or path == "/api/v1/conversations/{cid}/prompts":
        return body
    config = body.get("config") if path == "/api/v1/batches" else None
    conversation = config.get("conversation") if isinstance(config, dict) else None
    return conversation if isinstance(conversation, dict) else None


@schemathesis.hook
def map_case(context: schemathesis.HookContext, case: schemathesis.Case) -> schemathesis.Case:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or not isinstance(case.body, dict):
        return case
    options = _options(case.operation.path, case.body)
    if options is not None and isinstance(options.get("response_schema"), dict):
        chosen = len(json.dumps(options["response_schema"], default=str)) % len(SCHEMAS)
        options["response_schema"] = SCHEMAS[chosen]
    return case
