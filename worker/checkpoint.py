"""Where a turn stands, saved with every flush so any worker can resume it."""

from __future__ import annotations

from pydantic import BaseModel, Field

from shared.models.steps import ToolCall, UsageMetadata
from shared.models.value_enum import ValueEnum

__all__ = ["Phase", "TurnCheckpoint", "TurnTrace"]


class Phase(ValueEnum):
    START = "start"
    COMMAND = "command"
    CALL_MODEL = "call_model"
    RUN_TOOLS = "run_tools"
    FINISH = "finish"


class TurnTrace(BaseModel):
    """The turn's trace (worker/tracing.py): its ids, chosen at its start, and what started it."""

    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits: the turn's root span, recorded when the turn ends
    started_ns: int  # when the turn started (Unix time, ns): the root span's start
    link_trace_id: str = ""  # the span of the task that started the turn (and, through it,
    link_span_id: str = ""  # the web request or trigger that queued it), linked from the root
    sampled: bool = True  # False: the turn records no span (SIGNOFF_OTEL_SAMPLE_RATIO)


class TurnCheckpoint(BaseModel):
    """The turn's state machine position; history holds everything else."""

    phase: Phase = Phase.START
    turn_start: int = 0  # absolute history position of the turn's first step
    model_calls: int = 0
    tool_calls: int = 0
    pending_calls: list[ToolCall] = Field(default_factory=list)
    tools_disabled: bool = False
    repair_attempted: bool = False
    elapsed_s: float = 0.0  # running time only; parked time is not counted
    usage: UsageMetadata = Field(default_factory=UsageMetadata)
    # the turn's last model call the provider counted: its reported and estimated prompt tokens
    counted_prompt_tokens: int = 0
    estimated_prompt_tokens: int = 0
    final_text: str = ""
    structured_output: object = None
    failure: str = ""  # set when the turn must end failed (invalid structured output)
    approvals: dict[str, str] = Field(default_factory=dict)  # call id -> notification id
    # calls parked on a question of their own tool (InputNeeded): they resume with the answer
    input_calls: list[str] = Field(default_factory=list)
    trace: TurnTrace | None = None  # None while tracing is off
