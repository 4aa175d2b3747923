"""What a leg tells the metrics and the turn's trace (`worker/tracing.py`): each hook is
called once its fact is written to Redis.

A hook runs after the flush that makes its fact true (a turn's start, its end, a tool's
result), so a fenced or failed flush counts nothing and the leg that writes it again
counts it then: every counter moves once per fact, on whichever worker wrote it. Label
values are the conversation's agent and model and the tool's name, bounded
(`shared/metrics/labels.py`); never an id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.metrics import series
from shared.models.events import TurnStatus
from shared.models.steps import ToolCall, UsageMetadata
from worker import tracing
from worker.leg import Leg

__all__ = [
    "ToolCount",
    "approval_decided",
    "approval_requested",
    "leg_ended",
    "model_call",
    "tool_called",
    "turn_ended",
    "turn_started",
]

_MICROS = 1_000_000


def _turn_labels(leg: Leg) -> tuple[str, str]:
    return series.AGENT(leg.config.agent), series.MODEL(leg.config.model)


def turn_started(leg: Leg) -> None:
    series.child(series.TURNS_STARTED, *_turn_labels(leg)).inc()


def turn_ended(leg: Leg, status: TurnStatus, *, code: str = "", error: str = "") -> None:
    """The turn's end flush was written: its status and its running time (parked excluded)."""
    tracing.turn_ended(leg, status, error=error)
    agent, model = _turn_labels(leg)
    series.child(series.TURNS_ENDED, agent, model, status.value).inc()
    series.child(series.TURN_DURATION, agent, model, status.value).observe(leg.elapsed_s())
    if status is TurnStatus.FAILED:
        series.child(series.TURN_FAILURES, agent, model, code or "error").inc()


def model_call(
    leg: Leg,
    *,
    outcome: str,
    started_ns: int,
    duration_s: float,
    first_token_s: float | None,
    usage: UsageMetadata | None,
    finish_reason: str = "",
    error: str = "",
    messages: Any = None,
    answer: str = "",
) -> None:
    """One model call ended (`ok`, `error`, `rate_limited` or `stopped`), with what it used
    and cost."""
    tracing.model_call(
        leg,
        started_ns=started_ns,
        usage=usage,
        finish_reason=finish_reason,
        error=error,
        messages=messages,
        answer=answer,
    )
    provider, model = series.PROVIDER(leg.config.provider), series.MODEL(leg.config.model)
    series.child(series.MODEL_CALLS, provider, model, outcome).inc()
    series.child(series.MODEL_CALL_DURATION, provider, model).observe(duration_s)
    if first_token_s is not None:
        series.child(series.MODEL_FIRST_TOKEN, provider, model).observe(first_token_s)
    if usage is not None:
        series.child(series.MODEL_TOKENS, model, "input").inc(usage.prompt_token_count)
        series.child(series.MODEL_TOKENS, model, "output").inc(usage.candidates_token_count)
        series.child(series.MODEL_COST, model).inc(usage.cost_micros / _MICROS)


@dataclass(frozen=True)
class ToolCount:
    """How a tool call is counted and traced: whether a registry knows the tool, its outcome
    (auto, allowed, denied, failed...), when it began, and the person's decision, if any."""

    known: bool
    outcome: str
    started_ns: int
    approver: str = ""
    requested_at: float | None = None
    waited_s: float | None = None


def tool_called(leg: Leg, call: ToolCall, count: ToolCount, result: Any) -> None:
    """A tool call's result was written; a name no registry knows is counted as `unknown`."""
    series.child(
        series.TOOL_CALLS, series.TOOL(call.name) if count.known else "unknown", count.outcome
    ).inc()
    tracing.tool_call(
        leg,
        call,
        started_ns=count.started_ns,
        outcome=count.outcome,
        result=result,
        approver=count.approver,
        requested_at=count.requested_at,
        waited_s=count.waited_s,
    )


def approval_requested(tool: str | None) -> None:
    series.child(series.APPROVALS_REQUESTED, series.TOOL(tool)).inc()


def approval_decided(tool: str, decision: str, waited_s: float) -> None:
    series.child(series.APPROVAL_WAIT, series.TOOL(tool), decision).observe(max(waited_s, 0.0))


def leg_ended(outcome: str) -> None:
    series.child(series.LEGS, outcome).inc()
