"""Running the tool calls of a model response, each exactly once.

Before a tool runs, its call id is claimed in the conversation's `ToolLedger`; its
outcome is recorded under the call id by the flush that writes the result step. A
redelivered leg reuses a recorded outcome, and a call claimed without an outcome (the
worker died while it ran) is reported to the model instead of being run a second time.
"""

from __future__ import annotations

import json
import time
from enum import Enum
from functools import partial
from typing import Any

from shared.errors import StorageError
from shared.models.config import ToolPolicy
from shared.models.events import ConversationStatus, StepEvent, TurnStatus
from shared.models.steps import Step, StepStatus, ToolCall
from shared.store.conversations import allow_field
from shared.store.policy import effective_policy
from worker import observe
from worker.approval import Decision, decision_for, park, park_for_input
from worker.checkpoint import Phase
from worker.flush import Flush
from worker.leg import Leg
from worker.live_question import LiveQuestion
from worker.observe import ToolCount
from worker.tools import ToolContext, ToolOutcome, ToolRegistry
from worker.tools.ask_operator import ASK_OPERATOR, question_problem
from worker.tools.base import InputNeeded, Resumed

__all__ = ["ToolPhase", "policy_for", "run_pending_tools"]


class ToolPhase(str, Enum):
    DONE = "done"
    CANCELLED = "cancelled"
    PARKED = "parked"


def policy_for(
    leg: Leg, registry: ToolRegistry, name: str, *, for_call: bool = False
) -> ToolPolicy | None:
    """The policy for a tool in this conversation, or None when it is not enabled.

    The operator's rules came with the leg's claim (`worker/lua/claim.lua`).
    `for_call`: deciding about an actual call, so a batch-wide allow is read too.
    """
    if name not in registry:
        return None
    tool = registry.get(name)
    # An MCP tool is in the leg's registry because the conversation selects it.
    enabled = True if tool.server is not None else None
    if enabled is None and leg.config.tools is not None and name not in leg.config.tools:
        return None
    decide = partial(
        effective_policy,
        name,
        default=tool.policy,
        operator=leg.policy,
        config=leg.config,
        enabled=enabled,
    )
    policy = decide()
    if policy is ToolPolicy.AUTO:
        return policy  # a sticky allow changes nothing: no need to read the batch's
    sticky = leg.flags.get(allow_field(name)) == "1" or (for_call and _allowed_for_batch(leg, name))
    return decide(sticky_allow=True) if sticky else policy


def _allowed_for_batch(leg: Leg, name: str) -> bool:
    """Whether an operator allowed this tool for the rest of the conversation's batch."""
    batch_id = leg.config.batch_id
    if not batch_id:
        return False
    return leg.batches.tool_allowed(batch_id, name)


def run_pending_tools(leg: Leg, registry: ToolRegistry) -> ToolPhase:
    """Runs (or reuses) each pending call, parking on the first that needs a person."""
    while leg.checkpoint.pending_calls:
        if leg.cancel_requested():
            return ToolPhase.CANCELLED
        call = leg.checkpoint.pending_calls[0]
        decision = decision_for(leg, call)
        if decision is None and _needs_person(leg, registry, call):
            park(leg, registry, call)
            return ToolPhase.PARKED
        known, started_ns = call.name in registry, time.time_ns()
        try:
            if decision is None:
                outcome, label = _decide_and_run(leg, registry, call)
                _write_result(leg, call, outcome, counted=ToolCount(known, label, started_ns))
            else:
                _write_decided(leg, registry, call, decision)
        except InputNeeded as need:
            if not call.id:  # nothing to hold it by, so it could never resume
                failed = ToolOutcome.failure(f"{call.name} asked for input; it needs a call id")
                _write_result(leg, call, failed, counted=ToolCount(known, "failed", started_ns))
                continue
            park_for_input(leg, call, need)
            return ToolPhase.PARKED
    leg.checkpoint.phase = Phase.CALL_MODEL
    return ToolPhase.DONE


def _needs_person(leg: Leg, registry: ToolRegistry, call: ToolCall) -> bool:
    within_limit = leg.checkpoint.tool_calls < leg.config.limits.max_tool_calls
    asks = policy_for(leg, registry, call.name, for_call=True) is ToolPolicy.ASK
    # A question whose answer schema is refused runs (and fails) instead of parking.
    unaskable = call.name == ASK_OPERATOR and question_problem(call.args) is not None
    return within_limit and asks and not unaskable


def _write_decided(leg: Leg, registry: ToolRegistry, call: ToolCall, decision: Decision) -> None:
    """Continues a parked call with the operator's decision, back in status running."""
    _resume(leg)
    started_ns = time.time_ns()
    outcome = decision.outcome
    if outcome is None:
        assert decision.run_with is not None
        outcome = _run_once(leg, registry, decision.run_with, decision)
    allow_tool = None
    if decision.sticky == "conversation":
        allow_tool = call.name
        leg.flags[allow_field(call.name)] = "1"
    elif decision.sticky == "batch" and leg.config.batch_id:
        leg.batches.allow_tool(leg.config.batch_id, call.name)
    label = decision.label if outcome.ok or decision.denied else "failed"
    _write_result(
        leg,
        decision.run_with or call,
        outcome,
        counted=ToolCount(
            call.name in registry,
            label,
            started_ns,
            approver=decision.approver,
            requested_at=decision.requested_at,
            waited_s=decision.waited_s,
        ),
        denied=decision.denied,
        allow_tool=allow_tool,
    )
    observe.approval_decided(call.name, decision.label, decision.waited_s)


def _resume(leg: Leg) -> None:
    """The claim put the parked turn back to running (worker/lua/claim.lua); the flush's
    hooks (a batch item's state) hear of it here. Told again by a leg whose worker died
    before telling, which changes nothing the second time (a batch's transition is
    idempotent)."""
    leg.writer.announce(
        Flush(
            turn_status=TurnStatus.RUNNING,
            conversation_status=ConversationStatus.RUNNING,
            parked_on="",
        )
    )


def _decide_and_run(leg: Leg, registry: ToolRegistry, call: ToolCall) -> tuple[ToolOutcome, str]:
    """Runs a call no person decides; returns its outcome and how the metrics count it."""
    policy = policy_for(leg, registry, call.name)
    limits = leg.config.limits
    if leg.checkpoint.tool_calls >= limits.max_tool_calls:
        leg.checkpoint.tools_disabled = True
        failed = ToolOutcome(
            ok=False,
            result=None,
            error=(
                f"tool call limit of {limits.max_tool_calls} per turn reached; answer without tools"
            ),
        )
        return failed, "failed"
    if policy is None:
        available = ", ".join(sorted(_enabled(leg, registry))) or "none"
        reason = (
            registry.gone_reason(call.name)
            or f"tool {call.name!r} is not available in this conversation"
        )
        return ToolOutcome(ok=False, error=f"{reason}; available: {available}"), "failed"
    if policy is ToolPolicy.DENY:
        return ToolOutcome(ok=False, error=f"tool {call.name!r} is denied by policy"), "denied"
    outcome = _run_once(leg, registry, call)
    return outcome, "auto" if outcome.ok else "failed"


def _enabled(leg: Leg, registry: ToolRegistry) -> list[str]:
    return [name for name in registry.names() if policy_for(leg, registry, name) is not None]


def _run_once(
    leg: Leg, registry: ToolRegistry, call: ToolCall, decision: Decision | None = None
) -> ToolOutcome:
    """Claims the call id, then runs the tool; a claimed id is never run again (a call held
    for input is claimed once more, to run with the person's answer).

    InputNeeded (the tool asks a person) passes through: the caller parks the call on it.
    """
    resumed = None
    if decision is not None and decision.resumes:
        state = leg.tool_calls.resume(call.id)
        if state is None:
            return leg.tool_calls.recorded(call)
        resumed = Resumed(state=state, answer=decision.answer)
    elif call.id and not leg.tool_calls.claim(call.id):
        return leg.tool_calls.recorded(call)
    context = ToolContext(
        settings=leg.settings,
        conversation_id=leg.cid,
        turn_id=leg.turn_id,
        call_id=call.id,
        ask=LiveQuestion(leg, call).ask,
        resumed=resumed,
    )
    leg.checkpoint.tool_calls += 1
    leg.writer.send_held()  # the tool acts outside: what the leg wrote is in Redis first
    return registry.execute(call, context)


def result_text(outcome: ToolOutcome, *, denied: bool = False) -> str:
    """What the model reads as the tool's result (or why there is none)."""
    if denied:
        payload: Any = {"denied": outcome.error}
    else:
        payload = {"result": outcome.result} if outcome.ok else {"error": outcome.error}
    return json.dumps(payload, default=str, ensure_ascii=False)


def _result_status(outcome: ToolOutcome, *, denied: bool) -> StepStatus:
    if denied:
        return StepStatus.CANCELED
    return StepStatus.DONE if outcome.ok else StepStatus.ERROR


def _write_result(
    leg: Leg,
    call: ToolCall,
    outcome: ToolOutcome,
    *,
    counted: ToolCount,
    denied: bool = False,
    allow_tool: str | None = None,
) -> None:
    """Appends the call's result step, and the checkpoint past the call; `counted`: how the
    metrics and the trace record it."""
    step = Step.tool_result(
        call,
        result_text(outcome, denied=denied),
        turn_id=leg.turn_id,
        index=leg.writer.next_position,
        status=_result_status(outcome, denied=denied),
        error="" if outcome.ok else outcome.error,
    )
    leg.checkpoint.pending_calls = leg.checkpoint.pending_calls[1:]
    if not leg.checkpoint.pending_calls:
        leg.checkpoint.phase = Phase.CALL_MODEL
    event = StepEvent(
        conversation_id=leg.cid, turn_id=leg.turn_id, step_index=step.step_index, step=step
    )
    recorded = {call.id: outcome} if call.id else {}
    flush = Flush(
        steps=[step],
        events=[event],
        checkpoint=leg.saved_checkpoint(),
        tool_results=recorded,
        allow_tool=allow_tool,
    )

    def settle() -> None:
        if call.id:  # the outcome is known here: under this leg's claim, for the next leg
            leg.tool_calls.settle(call.id, outcome)

    if leg.checkpoint.phase is Phase.CALL_MODEL:
        # the last result: it goes out with the next call's reservation, in one round trip
        leg.writer.hold(flush, if_unwritten=settle)
    else:
        try:
            leg.writer.write(flush)
        except StorageError:
            settle()
            raise
    observe.tool_called(leg, call, counted, outcome.result if outcome.ok else outcome.error)
