"""Where a turn stands, saved with every flush so any worker can resume it."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

from shared.models.steps import ToolCall, UsageMetadata

__all__ = ["Phase", "TurnCheckpoint"]


class Phase(str, Enum):
    START = "start"
    COMMAND = "command"
    CALL_MODEL = "call_model"
    RUN_TOOLS = "run_tools"
    FINISH = "finish"


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
    final_text: str = ""
    structured_output: object = None
    failure: str = ""  # set when the turn must end failed (invalid structured output)
    approvals: dict[str, str] = Field(default_factory=dict)  # call id -> notification id
