"""A turn as one trace, across its legs and workers, in OpenTelemetry's GenAI conventions.

The turn's ids are chosen when it starts and kept in its checkpoint, so the leg that
resumes it after a park (on any worker, hours later) adds to the same trace. Spans are
recorded once their work is done, with their own start and end times: `chat {model}`
for each model call, `execute_tool {tool}` for each tool call (with the decision, the
approver and the wait), `await_approval {tool}` for the time a call waited for a person,
and, when the turn ends, its root `invoke_agent {agent}` from its start, with a link to
the task that started it (and so to the web request or trigger that queued it).
Contents (prompts, answers, arguments, results) go on spans only when
`SIGNOFF_OTEL_CAPTURE_CONTENT` is on.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode
from pydantic import BaseModel

from shared.models.events import TurnStatus
from shared.models.steps import ToolCall, UsageMetadata
from shared.tracing.ids import new_ids, preset
from worker.checkpoint import TurnTrace
from worker.leg import Leg

__all__ = ["ensure", "model_call", "tool_call", "trace_id", "turn_ended"]

_tracer = trace.get_tracer("signoff.worker")
_SAMPLED = trace.TraceFlags(trace.TraceFlags.SAMPLED)
_LOW_64 = (1 << 64) - 1


def ensure(leg: Leg) -> None:
    """Chooses the turn's trace ids when it starts (kept from then on by its checkpoint)."""
    if leg.checkpoint.trace is not None or not _recording():
        return
    trace_id, span_id = new_ids()
    started = trace.get_current_span().get_span_context()  # the advance task's, if traced
    leg.checkpoint.trace = TurnTrace(
        # as TraceIdRatioBased decides: the id's low 64 bits against the ratio's share
        sampled=trace_id & _LOW_64 < leg.settings.otel_sample_ratio * 2**64,
        trace_id=f"{trace_id:032x}",
        span_id=f"{span_id:016x}",
        started_ns=time.time_ns(),
        link_trace_id=f"{started.trace_id:032x}" if started.is_valid else "",
        link_span_id=f"{started.span_id:016x}" if started.is_valid else "",
    )


def trace_id(leg: Leg) -> str:
    """The turn's trace id, for log lines ("" while tracing is off or the turn is not traced)."""
    turn = _sampled(leg)
    return turn.trace_id if turn is not None else ""


def _sampled(leg: Leg) -> TurnTrace | None:
    """The turn's trace, if the turn is one of those traced."""
    turn = leg.checkpoint.trace
    return turn if turn is not None and turn.sampled else None


def _recording() -> bool:
    return not isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider
    )


def _parent(turn: TurnTrace) -> Any:
    root = SpanContext(int(turn.trace_id, 16), int(turn.span_id, 16), True, _SAMPLED)
    return trace.set_span_in_context(NonRecordingSpan(root))


def _base(leg: Leg) -> dict[str, Any]:
    return {
        "gen_ai.conversation.id": leg.cid,
        "signoff.turn.id": leg.turn_id,
        "gen_ai.provider.name": leg.config.provider,
        "gen_ai.request.model": leg.config.model,
        **({"gen_ai.agent.name": leg.config.agent} if leg.config.agent else {}),
    }


def _content(leg: Leg, value: Any) -> str | None:
    if not leg.settings.otel_capture_content:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, default=_jsonable, ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    """A message or a tool call as JSON (a message's media as their types only)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        found = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if "media" in found:
            found["media"] = [getattr(m, "media_type", "") for m in found["media"]]
        return {k: v for k, v in found.items() if v not in ("", (), [], None)}
    return str(value)


def model_call(
    leg: Leg,
    *,
    started_ns: int,
    usage: UsageMetadata | None,
    finish_reason: str = "",
    error: str = "",
    messages: Any = None,
    answer: str = "",
) -> None:
    """`chat {model}`: one model call, from its request to the end of its stream."""
    turn = _sampled(leg)
    if turn is None:
        return
    attributes = {**_base(leg), "gen_ai.operation.name": "chat"}
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage.prompt_token_count
        attributes["gen_ai.usage.output_tokens"] = usage.candidates_token_count
    if finish_reason:
        attributes["gen_ai.response.finish_reasons"] = [finish_reason]
    for name, value in (("gen_ai.input.messages", messages), ("gen_ai.output.messages", answer)):
        captured = _content(leg, value) if value else None
        if captured is not None:
            attributes[name] = captured
    span = _tracer.start_span(
        f"chat {leg.config.model}",
        context=_parent(turn),
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=started_ns,
    )
    if error:
        span.set_status(Status(StatusCode.ERROR, error[:500]))
        span.set_attribute("error.type", "provider_error")
    span.end()


def tool_call(
    leg: Leg,
    call: ToolCall,
    *,
    started_ns: int,
    outcome: str,
    result: Any,
    approver: str = "",
    requested_at: float | None = None,
    waited_s: float | None = None,
) -> None:
    """`execute_tool {tool}` for the call's run (or its decision), and `await_approval {tool}`
    for the time it waited for a person, when it did."""
    turn = _sampled(leg)
    if turn is None:
        return
    attributes: dict[str, Any] = {
        **_base(leg),
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id or "",
        "signoff.tool.outcome": outcome,
    }
    if approver:
        attributes["signoff.approval.approver"] = approver
    if waited_s is not None:
        attributes["signoff.approval.wait_s"] = round(waited_s, 3)
    for name, value in (
        ("gen_ai.tool.call.arguments", call.args),
        ("gen_ai.tool.call.result", result),
    ):
        captured = _content(leg, value)
        if captured is not None:
            attributes[name] = captured
    context = _parent(turn)
    if requested_at is not None and waited_s is not None:
        waited = _tracer.start_span(
            f"await_approval {call.name}",
            context=context,
            attributes={"gen_ai.tool.call.id": call.id or "", "signoff.approval.decision": outcome},
            start_time=int(requested_at * 1e9),
        )
        waited.end(end_time=int((requested_at + waited_s) * 1e9))
    span = _tracer.start_span(
        f"execute_tool {call.name}", context=context, attributes=attributes, start_time=started_ns
    )
    if outcome == "failed":
        span.set_status(Status(StatusCode.ERROR))
    span.end()


def turn_ended(leg: Leg, status: TurnStatus, *, error: str = "") -> None:
    """The root span, `invoke_agent {agent}`, from the turn's start to now, with its ids."""
    turn = _sampled(leg)
    if turn is None:
        return
    usage = leg.checkpoint.usage
    attributes = {
        **_base(leg),
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.usage.input_tokens": usage.prompt_token_count,
        "gen_ai.usage.output_tokens": usage.candidates_token_count,
        "signoff.turn.status": status.value,
    }
    links = []
    if turn.link_trace_id:
        linked = SpanContext(
            int(turn.link_trace_id, 16), int(turn.link_span_id, 16), True, _SAMPLED
        )
        links.append(Link(linked))
    name = f"invoke_agent {leg.config.agent}" if leg.config.agent else "invoke_agent"
    with preset(int(turn.trace_id, 16), int(turn.span_id, 16)):
        span = _tracer.start_span(
            name,
            context=trace.set_span_in_context(trace.INVALID_SPAN),
            attributes=attributes,
            links=links,
            start_time=turn.started_ns,
        )
    if status is TurnStatus.FAILED:
        span.set_status(Status(StatusCode.ERROR, error[:500]))
    span.end()
