"""Running the tool calls of a model response, each exactly once.

Before a tool runs, its call id is marked started; its outcome is recorded under
the call id before the result step is written. A redelivered leg reuses a
recorded outcome, and a call marked started without an outcome (the worker died
while it ran) is reported to the model instead of being run a second time.
"""

from __future__ import annotations

import json
from typing import Any

from shared.config import ToolPolicy
from shared.events import StepEvent
from shared.steps import Step, StepSource, StepStatus, StepTarget, StepType, ToolCall
from worker.checkpoint import Phase
from worker.leg import Leg
from worker.tools import ToolContext, ToolOutcome, ToolRegistry
from worker.writer import Flush

__all__ = ["policy_for", "run_pending_tools"]

_STARTED = json.dumps({"state": "started"})


def policy_for(leg: Leg, registry: ToolRegistry, name: str) -> ToolPolicy | None:
    """The policy for a tool in this conversation, or None when it is not enabled."""
    config = leg.config
    if config.tools is not None and name not in config.tools:
        return None
    if name not in registry.names():
        return None
    if config.allow_all:
        return ToolPolicy.AUTO
    if config.tools is not None:
        return config.tools[name]
    return registry.get(name).policy


def run_pending_tools(leg: Leg, registry: ToolRegistry) -> bool:
    """Runs (or reuses) each pending call; returns False when the turn was cancelled."""
    while leg.checkpoint.pending_calls:
        if leg.cancel_requested():
            return False
        call = leg.checkpoint.pending_calls[0]
        outcome = _decide_and_run(leg, registry, call)
        _write_result(leg, call, outcome)
    leg.checkpoint.phase = Phase.CALL_MODEL
    return True


def _recorded(leg: Leg, call: ToolCall) -> ToolOutcome:
    """The outcome recorded under a call id that was already claimed by an earlier leg."""
    raw = leg.client.hget(leg.keys.tool_results(leg.cid), call.id)
    record = json.loads(raw) if raw else {"state": "started"}
    if record.get("state") == "started":
        return ToolOutcome(
            ok=False,
            result=None,
            error=(
                f"the worker stopped while {call.name} was running; it was not run again and "
                "its effect is unknown"
            ),
        )
    return ToolOutcome(
        ok=bool(record["ok"]), result=record.get("result"), error=str(record.get("error", ""))
    )


def _decide_and_run(leg: Leg, registry: ToolRegistry, call: ToolCall) -> ToolOutcome:
    policy = policy_for(leg, registry, call.name)
    limits = leg.config.limits
    if leg.checkpoint.tool_calls >= limits.max_tool_calls:
        leg.checkpoint.tools_disabled = True
        return ToolOutcome(
            ok=False,
            result=None,
            error=(
                f"tool call limit of {limits.max_tool_calls} per turn reached; answer without tools"
            ),
        )
    if policy is None:
        available = ", ".join(sorted(_enabled(leg, registry))) or "none"
        return ToolOutcome(
            ok=False,
            result=None,
            error=(
                f"tool {call.name!r} is not available in this conversation; available: {available}"
            ),
        )
    if policy is ToolPolicy.DENY:
        return ToolOutcome(ok=False, result=None, error=f"tool {call.name!r} is denied by policy")
    if policy is ToolPolicy.ASK:
        return ToolOutcome(
            ok=False,
            result=None,
            error=(
                f"tool {call.name!r} needs an operator's approval, and approvals are not enabled"
            ),
        )
    return _run_once(leg, registry, call)


def _enabled(leg: Leg, registry: ToolRegistry) -> list[str]:
    return [name for name in registry.names() if policy_for(leg, registry, name) is not None]


def _run_once(leg: Leg, registry: ToolRegistry, call: ToolCall) -> ToolOutcome:
    """Claims the call id (HSETNX), then runs the tool; a claimed id is never run again."""
    if call.id and not leg.client.hsetnx(leg.keys.tool_results(leg.cid), call.id, _STARTED):
        return _recorded(leg, call)
    context = ToolContext(
        settings=leg.settings, conversation_id=leg.cid, turn_id=leg.turn_id, call_id=call.id
    )
    outcome = registry.execute(call, context)
    leg.checkpoint.tool_calls += 1
    return outcome


def _record(outcome: ToolOutcome) -> str:
    return json.dumps(
        {"state": "done", "ok": outcome.ok, "result": outcome.result, "error": outcome.error},
        default=str,
    )


def result_text(outcome: ToolOutcome) -> str:
    """What the model reads as the tool's result."""
    payload: Any = {"result": outcome.result} if outcome.ok else {"error": outcome.error}
    return json.dumps(payload, default=str, ensure_ascii=False)


def _write_result(leg: Leg, call: ToolCall, outcome: ToolOutcome) -> None:
    step = Step(
        id=f"{call.id or leg.turn_id}-result",
        step_index=leg.writer.next_position,
        type=StepType.TOOL_RESULT,
        source=StepSource.SYSTEM,
        target=StepTarget.ENVIRONMENT,
        status=StepStatus.DONE if outcome.ok else StepStatus.ERROR,
        content=result_text(outcome),
        tool_calls=[call],
        error="" if outcome.ok else outcome.error,
    )
    leg.checkpoint.pending_calls = leg.checkpoint.pending_calls[1:]
    if not leg.checkpoint.pending_calls:
        leg.checkpoint.phase = Phase.CALL_MODEL
    event = StepEvent(
        conversation_id=leg.cid, turn_id=leg.turn_id, step_index=step.step_index, step=step
    )
    recorded = {call.id: _record(outcome)} if call.id else {}
    leg.writer.write(
        Flush(
            steps=[step], events=[event], turn_fields=leg.saved_checkpoint(), tool_results=recorded
        )
    )
