"""Harmless built-in tools the offline demo can call: get_time, calculator and send_email."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeGuard

from shared.models.config import ToolPolicy
from worker.tools.base import Tool, ToolContext, ToolFailed, object_schema, tool

__all__ = ["DEMO_TOOLS", "MAX_EXPRESSION_CHARS", "calculator", "evaluate", "get_time", "send_email"]

MAX_EXPRESSION_CHARS = 500
_MAX_POWER_BITS = 4_096  # bounds 9 ** 9 ** 9 and friends

Number = int | float


def _power(base: Number, exponent: Number) -> Number:
    """A power, refused when it would take long to compute or is not a real number."""
    magnitude = abs(base)
    if magnitude > 1 and exponent > 0 and exponent * math.log2(magnitude) > _MAX_POWER_BITS:
        raise ToolFailed("the result is too large")
    result = base**exponent
    if isinstance(result, complex):
        raise ToolFailed("the result is not a real number")
    return result


_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: _power,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CONSTRUCTS: dict[type[ast.AST], str] = {
    ast.Call: "a function call",
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
}


@tool(
    description="Get the current date and time in UTC, as ISO-8601.",
    parameters=object_schema({}),
)
def get_time(args: dict[str, Any], context: ToolContext) -> dict[str, str]:
    """Returns the current UTC time, so the demo can show a tool with a live answer."""
    return {"utc": datetime.now(UTC).isoformat(timespec="seconds")}


@tool(
    description="Evaluate arithmetic on numbers: + - * / ** and parentheses.",
    parameters=object_schema(
        {"expression": {"type": "string", "description": "For example: (2 + 3) * 4 ** 0.5"}},
        required=("expression",),
    ),
)
def calculator(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """Evaluates an arithmetic expression by walking its syntax tree; nothing is executed."""
    expression = args["expression"]
    return {"expression": expression, "result": evaluate(expression)}


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression; anything but numbers and + - * / ** is refused."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolFailed(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise ToolFailed(f"expression {expression!r} is not valid arithmetic") from exc
    try:
        value = _value(tree.body)
    except ZeroDivisionError as exc:
        raise ToolFailed("division by zero") from exc
    except OverflowError as exc:
        raise ToolFailed("the result is too large") from exc
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolFailed("the result is too large")
    return value


def _value(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant) and _is_number(node.value):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    raise ToolFailed(
        f"only numbers, + - * / ** and parentheses are allowed; found {_describe(node)}"
    )


def _is_number(value: object) -> TypeGuard[Number]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"the name {node.id!r}"
    if isinstance(node, ast.Constant):
        return f"the {type(node.value).__name__} constant {node.value!r}"
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        return f"the operator {type(node.op).__name__}"
    return _CONSTRUCTS.get(type(node), f"a {type(node).__name__} expression")


@tool(
    description="Send an email to one recipient.",
    parameters=object_schema(
        {
            "to": {"type": "string", "format": "email"},
            "subject": {"type": "string"},
            "body": {"type": "string"},
        },
        required=("to", "subject", "body"),
    ),
    policy=ToolPolicy.ASK,
)
def send_email(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """Sends nothing: it records the message as queued.

    It exists so the demo has a risky-looking action that needs an operator's approval.
    """
    message = {key: args[key] for key in ("to", "subject", "body")}
    return {"status": "queued", "id": context.call_id, "message": message}


DEMO_TOOLS: tuple[Tool, ...] = (get_time, calculator, send_email)
