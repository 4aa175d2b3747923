"""A turn's trace in one process: its root span takes the ids its checkpoint kept, children
hang under it, and contents appear only when an operator opts in."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared.models.events import TurnStatus
from shared.models.steps import ToolCall, UsageMetadata
from shared.settings import Settings
from shared.tracing.ids import TurnIds
from worker import tracing
from worker.checkpoint import TurnCheckpoint

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider() -> None:
    sdk = TracerProvider(id_generator=TurnIds())
    sdk.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(sdk)


def leg(*, capture: bool, ratio: float = 1.0) -> SimpleNamespace:
    return SimpleNamespace(
        cid="c1",
        turn_id="t1",
        checkpoint=TurnCheckpoint(usage=UsageMetadata.from_counts(7, 3)),
        config=SimpleNamespace(provider="scripted", model="signoff-demo", agent="triage"),
        settings=Settings(otel_capture_content=capture, otel_sample_ratio=ratio),
    )


@pytest.mark.parametrize("capture", [False, True])
def test_the_root_takes_the_kept_ids_and_contents_need_opting_in(capture: bool) -> None:
    EXPORTER.clear()
    turn = leg(capture=capture)
    tracing.ensure(turn)  # type: ignore[arg-type]
    kept = turn.checkpoint.trace
    assert kept is not None and tracing.trace_id(turn) == kept.trace_id  # type: ignore[arg-type]
    resumed = leg(capture=capture)  # another worker, later: the checkpoint as saved
    resumed.checkpoint = TurnCheckpoint.model_validate_json(turn.checkpoint.model_dump_json())
    tracing.model_call(
        resumed,  # type: ignore[arg-type]
        started_ns=kept.started_ns,
        usage=UsageMetadata.from_counts(7, 3),
        finish_reason="stop",
        messages=[{"role": "user", "content": "the prompt"}],
        answer="the answer",
    )
    call = ToolCall(id="call_1", name="send_email", args={"to": "a@example.com"})
    tracing.tool_call(resumed, call, started_ns=kept.started_ns, outcome="auto", result={"ok": 1})  # type: ignore[arg-type]
    tracing.turn_ended(resumed, TurnStatus.COMPLETED)  # type: ignore[arg-type]
    spans = {s.name: s for s in EXPORTER.get_finished_spans()}
    root = spans["invoke_agent triage"]
    assert f"{root.context.trace_id:032x}" == kept.trace_id
    assert f"{root.context.span_id:016x}" == kept.span_id and root.parent is None
    for name in ("chat signoff-demo", "execute_tool send_email"):
        assert spans[name].parent.span_id == root.context.span_id
        assert spans[name].context.trace_id == root.context.trace_id
    assert root.attributes["gen_ai.usage.input_tokens"] == 7
    chat, tool = spans["chat signoff-demo"].attributes, spans["execute_tool send_email"].attributes
    assert chat["gen_ai.usage.output_tokens"] == 3
    if capture:
        assert "the prompt" in chat["gen_ai.input.messages"]
        assert chat["gen_ai.output.messages"] == "the answer"
        assert tool["gen_ai.tool.call.arguments"] == '{"to": "a@example.com"}'
    else:
        assert not {
            k for k in {**chat, **tool} if k.endswith((".messages", ".arguments", ".result"))
        }


def _whole_turn(turn: SimpleNamespace) -> int:
    """Ends a turn with a model call and a tool call; the spans it recorded."""
    EXPORTER.clear()
    tracing.ensure(turn)  # type: ignore[arg-type]
    kept = turn.checkpoint.trace
    assert kept is not None
    resumed = leg(capture=False, ratio=1.0)  # a worker whose own ratio differs: the kept choice
    resumed.checkpoint = TurnCheckpoint.model_validate_json(turn.checkpoint.model_dump_json())
    tracing.model_call(resumed, started_ns=kept.started_ns, usage=None)  # type: ignore[arg-type]
    call = ToolCall(id="call_1", name="send_email", args={})
    tracing.tool_call(resumed, call, started_ns=kept.started_ns, outcome="auto", result=None)  # type: ignore[arg-type]
    tracing.turn_ended(resumed, TurnStatus.COMPLETED)  # type: ignore[arg-type]
    return len(EXPORTER.get_finished_spans())


def test_a_sampled_out_turn_records_nothing_even_where_it_resumes() -> None:
    assert _whole_turn(leg(capture=False, ratio=0.0)) == 0
    assert tracing.trace_id(leg(capture=False, ratio=0.0)) == ""
    assert _whole_turn(leg(capture=False, ratio=1.0)) == 3
    traced = sum(_whole_turn(leg(capture=False, ratio=0.25)) == 3 for _ in range(400))
    assert 50 <= traced <= 150  # a quarter of 400, well within chance
