"""One item's result, as the results and their exports show it: its latest attempt's answer,
or its error, the tool calls it made, how long it ran and what it cost. Pure: the store reads
the fields, this puts them together.
"""

from __future__ import annotations

import json
from typing import Any

from shared.models.steps import StepStatus, StepType

__all__ = ["TURN_FIELDS", "item_result"]

# What a result reads of an item's turn.
TURN_FIELDS = ("response", "error", "started_at", "finished_at")


def item_result(item: dict[str, Any], state: Any, turn: dict[str, str]) -> dict[str, Any]:
    """An item's result: its latest attempt's answer or error, and how many attempts."""
    result: dict[str, Any] = {
        "id": item["id"],
        "line": item["line"],
        "status": state or "invalid",
        "text": None,
        "structured_output": None,
        "usage": None,
        "error": item.get("error") or None,
        "denied": 0,
        "denials": [],
        "attempts": int(item.get("attempts", 1)),
        "conversation_id": item["conversation_id"],
        "tool_calls": None,
        "duration_s": _duration_s(turn),
    }
    if turn.get("response"):
        response = json.loads(turn["response"])
        denials = _denials(response)
        result.update(
            text=response.get("text"),
            structured_output=response.get("structured_output"),
            usage=response.get("usage_metadata"),
            denied=len(denials),
            denials=denials,
            tool_calls=_tool_calls(response),
        )
    elif turn.get("error"):
        result["error"] = turn["error"]
    return result


def _tool_calls(response: dict[str, Any]) -> list[str]:
    """The names of the tool calls the model made in the turn, in order (denied ones too)."""
    return [
        str(call.get("name"))
        for step in response.get("steps") or []
        if step.get("type") == StepType.TOOL_CALL.value
        for call in step.get("tool_calls") or []
    ]


def _duration_s(turn: dict[str, str]) -> float | None:
    """From the turn's start running to its end (approval waits included); None until both."""
    started, finished = turn.get("started_at"), turn.get("finished_at")
    if not started or not finished:
        return None
    return round(max(float(finished) - float(started), 0.0), 3)


def _denials(response: dict[str, Any]) -> list[str]:
    """Why each tool call of the turn did not run: an operator denied it, its approval expired
    (`EXPIRED_DENIAL`), or it was cancelled while it waited."""
    return [
        str(step.get("error") or "denied")
        for step in response.get("steps") or []
        if step.get("type") == StepType.TOOL_RESULT.value
        and step.get("status") == StepStatus.CANCELED.value
    ]
