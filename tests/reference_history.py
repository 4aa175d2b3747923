"""A pure-Python reference of a conversation's state, written from the seed's semantics.

It keeps every step in a list and trims from the front exactly as the seed
describes; the Redis store must be observably identical after every operation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.models.steps import Step, StepSource, StepType, UsageMetadata

DEFAULT_LIMIT = 10_000


@dataclass
class ReferenceHistory:
    max_history_size: int | None = None
    steps: list[Step] = field(default_factory=list)
    turn_start_indices: list[int] = field(default_factory=list)
    compaction_indices: list[int] = field(default_factory=list)
    cumulative_usage: UsageMetadata = field(default_factory=UsageMetadata)
    turn_usage: UsageMetadata | None = None
    last_response: str = ""
    last_structured_output: Any = None

    @property
    def limit(self) -> int:
        return DEFAULT_LIMIT if self.max_history_size is None else self.max_history_size

    def start_turn(self) -> None:
        self.turn_start_indices.append(len(self.steps))
        self.turn_usage = None

    def add_usage(self, usage: UsageMetadata) -> None:
        self.cumulative_usage = self.cumulative_usage + usage
        self.turn_usage = (self.turn_usage or UsageMetadata()) + usage

    def append(self, steps: list[Step]) -> None:
        for step in steps:
            if step.type is StepType.COMPACTION:
                self.compaction_indices.append(len(self.steps))
            if step.source is StepSource.MODEL and step.is_complete_response:
                self.last_response = step.content
            if step.type is StepType.FINISH and step.structured_output is not None:
                self.last_structured_output = step.structured_output
            self.steps.append(step)
        self._trim()

    def _trim(self) -> None:
        if self.limit == 0 or len(self.steps) <= self.limit:
            return
        drain = len(self.steps) - self.limit
        del self.steps[:drain]
        self.turn_start_indices = [i - drain for i in self.turn_start_indices if i >= drain]
        self.compaction_indices = [i - drain for i in self.compaction_indices if i >= drain]

    def clear(self) -> None:
        self.steps.clear()
        self.turn_start_indices.clear()
        self.compaction_indices.clear()
        self.cumulative_usage = UsageMetadata()
        self.turn_usage = None
        self.last_response = ""
        self.last_structured_output = None

    @property
    def turn_count(self) -> int:
        return len(self.turn_start_indices)
