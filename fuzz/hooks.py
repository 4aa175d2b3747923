"""Schemathesis hooks for `python -m fuzz.api` (loaded by schemathesis, in `.venv-fuzz`).

Some rules depend on what the server holds or on meaning no JSON Schema can state; in the
cases that must be accepted, values under them become ones that keep the rules (negative
cases keep what was generated):

- `response_schema` is a JSON Schema: the document declares it an object and names
  Signoff's bounds in words (`shared.models.config.RESPONSE_SCHEMA`), because no JSON
  Schema can say which objects are JSON Schemas within them (patterns in re2 syntax,
  `$ref` that resolve); it becomes one of `SCHEMAS`.
- `model_settings` may hold only what the provider honours (the scripted model the fuzz
  runs: max_output_tokens, seed, stop); the others are dropped.
- An agent's `tools` may only tighten the operator's policy, which depends on the tools
  workers describe: each becomes `deny`.
- A conversation, a batch or a schedule that names an agent names one that exists: the
  driver's (`fuzz.api.AGENT`, its first version), which no case deletes.
- A batch's `csv` must be a table whose rows fill the header and hold the columns its
  `template` names (in words in the document): it becomes `CSV`, and a template `TEMPLATE`.
- A re-run's `agent_version` without `agent` names a version of its source's agent, and the
  batches the fuzz re-runs run as none: it is dropped.
- A schedule's `cron` must parse, its `timezone` must be a zone and its `at` must be to come:
  they become ones that are.
- A route escalates to another route, never to itself (no JSON Schema compares two fields).
"""

from __future__ import annotations

import json
import time
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


SCRIPTED_SETTINGS = ("max_output_tokens", "seed", "stop")


def _honoured(body: dict[str, Any]) -> None:
    """Keeps only the model settings the scripted model honours, wherever they sit."""
    for value in body.values():
        if isinstance(value, dict):
            _honoured(value)
    settings = body.get("model_settings")
    if isinstance(settings, dict):
        body["model_settings"] = {k: v for k, v in settings.items() if k in SCRIPTED_SETTINGS}


CSV = "id,prompt,subject\nf1,hello,world\n"
TEMPLATE = "Say {subject}"

AGENT = "fuzz-agent"  # fuzz.api.AGENT (the hooks run in schemathesis's virtualenv)


def _existing_agent(body: dict[str, Any]) -> None:
    if isinstance(body.get("agent"), str):
        body["agent"] = AGENT
        version = body.get("agent_version")
        if isinstance(version, int | float) and not isinstance(version, bool):  # 7.0 is 7
            body["agent_version"] = 1


def _deletes_the_agent(case: schemathesis.Case) -> bool:
    operation = case.operation
    deletes = operation.path == "/api/v1/agents/{name}" and operation.method.upper() == "DELETE"
    return deletes and (case.path_parameters or {}).get("name") == AGENT


def _batch_inputs(path: str, body: dict[str, Any]) -> None:
    """A batch's CSV that fills its header, and no version of an agent a re-run's source lacks."""
    if path == "/api/v1/batches" and isinstance(body.get("csv"), str):
        body["csv"] = CSV
        if isinstance(body.get("template"), str):
            body["template"] = TEMPLATE
    if path.endswith("/rerun") and body.get("agent") is None:
        body.pop("agent_version", None)


@schemathesis.hook
def map_case(context: schemathesis.HookContext, case: schemathesis.Case) -> schemathesis.Case:
    if _deletes_the_agent(case):  # the stateful phase keeps it
        case.path_parameters = {**(case.path_parameters or {}), "name": f"{AGENT}-other"}
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or not isinstance(case.body, dict):
        return case
    path, body = case.operation.path, case.body
    options = _options(path, body)
    if options is not None and isinstance(options.get("response_schema"), dict):
        chosen = len(json.dumps(options["response_schema"], default=str)) % len(SCHEMAS)
        options["response_schema"] = SCHEMAS[chosen]
    _honoured(body)
    _existing_agent(body)
    if options is not None and options is not body:
        _existing_agent(options)
    _batch_inputs(path, body)
    if path.startswith("/api/v1/agents") and isinstance(body.get("tools"), dict):
        body["tools"] = {name: "deny" for name in body["tools"]}
    escalates_to = body.get("escalate_to")
    if (
        path == "/api/v1/routes"
        and isinstance(escalates_to, str)
        and escalates_to == body.get("name")
    ):
        body["escalate_to"] = "b" if body.get("name") == "a" else "a"  # another route's
    if path.startswith("/api/v1/schedules"):
        if isinstance(body.get("cron"), str):
            body["cron"] = "*/5 * * * *"
        if "timezone" in body:
            body["timezone"] = "UTC"
        if isinstance(body.get("at"), str):  # a time to come: one in the past never fires
            body["at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86_400))
    return case
