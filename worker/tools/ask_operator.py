"""`ask_operator`: the model asks a person for structured input.

The runtime never runs this tool's function: a call always parks the turn on an
interaction that an operator answers with Submit (content valid against the
schema the model gave, or a one-field answer by default) or Deny.
"""

from __future__ import annotations

from typing import Any

from shared.config import ToolPolicy
from worker.tools.base import ToolContext, ToolFailed, object_schema, tool

__all__ = ["ASK_OPERATOR", "DEFAULT_ANSWER_SCHEMA", "answer_schema", "ask_operator"]

ASK_OPERATOR = "ask_operator"
DEFAULT_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "minLength": 1}},
    "required": ["answer"],
    "additionalProperties": False,
}


@tool(
    name=ASK_OPERATOR,
    parameters=object_schema(
        {
            "question": {"type": "string", "minLength": 1, "description": "What to ask."},
            "schema": {"type": "object", "description": "JSON schema the answer must satisfy."},
        },
        required=("question",),
    ),
    policy=ToolPolicy.ASK,
)
def ask_operator(args: dict[str, Any], context: ToolContext) -> Any:
    """Ask a human operator a question and wait for their structured answer."""
    raise ToolFailed(
        "ask_operator is answered by an operator; the runtime parks instead of running it"
    )


def answer_schema(args: Any) -> dict[str, Any]:
    """The schema an answer must satisfy: the model's own, or a one-field answer."""
    schema = args.get("schema") if isinstance(args, dict) else None
    return schema if isinstance(schema, dict) and schema else DEFAULT_ANSWER_SCHEMA
