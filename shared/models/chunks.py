"""Stream chunks and the filter that derives them from steps.

The filter is a pure function of the steps, rules 1-4 of the seed:
1. Thought when source is Model, target is User and thinking_delta is non-empty;
2. Text when source is Model, target is User and content_delta is non-empty;
3. one ToolCall per call in a step, deduplicated by call id (empty ids never are);
4. steps targeted at the Environment produce nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from shared.models.steps import Step, StepSource, StepTarget, ToolCall

__all__ = ["ChunkFilter", "StreamChunk", "Text", "Thought", "ToolCallChunk", "filter_chunks"]


class Thought(BaseModel):
    """The model's reasoning, a fragment at a time."""

    kind: Literal["thought"] = "thought"
    step_index: int
    text: str


class Text(BaseModel):
    """Response text directed at the user, a fragment at a time."""

    kind: Literal["text"] = "text"
    step_index: int
    text: str


class ToolCallChunk(BaseModel):
    """A complete tool call requested by the model."""

    kind: Literal["tool_call"] = "tool_call"
    call: ToolCall


StreamChunk = Annotated[Thought | Text | ToolCallChunk, Field(discriminator="kind")]


class ChunkFilter:
    """Applies the rules to steps as they arrive, remembering the call ids it emitted."""

    def __init__(self) -> None:
        self._seen_call_ids: set[str] = set()

    def feed(self, step: Step) -> Iterator[Thought | Text | ToolCallChunk]:
        if step.target is StepTarget.ENVIRONMENT:
            return
        to_user = step.source is StepSource.MODEL and step.target is StepTarget.USER
        if to_user and step.thinking_delta:
            yield Thought(step_index=step.step_index, text=step.thinking_delta)
        if to_user and step.content_delta:
            yield Text(step_index=step.step_index, text=step.content_delta)
        for call in step.tool_calls:
            if call.id:
                if call.id in self._seen_call_ids:
                    continue
                self._seen_call_ids.add(call.id)
            yield ToolCallChunk(call=call)


def filter_chunks(steps: Iterable[Step]) -> list[Thought | Text | ToolCallChunk]:
    """The chunks a reader of these steps sees, in order."""
    chunk_filter = ChunkFilter()
    return [chunk for step in steps for chunk in chunk_filter.feed(step)]
