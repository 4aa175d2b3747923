"""`ask_operator`: the model asks a person for structured input.

The runtime never runs this tool's function: a call always parks the turn on an
interaction that an operator answers with Submit (content valid against the
schema the model gave, or a one-field answer by default) or Deny. A schema that
`check_schema` refuses (too big, a pattern re2 cannot run, ...) never parks: the call
runs instead and fails, so the model reads why and can ask again.
"""

from __future__ import annotations

from typing import Any

from shared.errors import InvalidInput
from shared.models.config import ToolPolicy
from shared.schema import check_schema
from worker.tools.base import ToolContext, ToolFailed, object_schema, tool

__all__ = [
    "ASK_OPERATOR",
    "DEFAULT_ANSWER_SCHEMA",
    "answer_schema",
    "ask_operator",
    "question_problem",
]

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
    problem = question_problem(args)
    if problem is not None:
        raise ToolFailed(problem)
    raise ToolFailed(
        "ask_operator is answered by an operator; the runtime parks instead of running it"
    )


def answer_schema(args: Any) -> dict[str, Any]:
    """The schema an answer must satisfy: the model's own, or a one-field answer."""
    schema = args.get("schema") if isinstance(args, dict) else None
    return schema if isinstance(schema, dict) and schema else DEFAULT_ANSWER_SCHEMA


def question_problem(args: Any) -> str | None:
    """Why no operator can be asked with these arguments (a bad answer schema); None if fine."""
    try:
        check_schema(answer_schema(args), name="schema")
    except InvalidInput as exc:
        return exc.message
    return None
