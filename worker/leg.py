"""What one leg of a turn works with: the conversation, its writer, its stores, its clock.

A leg reaches Redis only through these: the writer for the turn's flushes, the
process's delta ticker for streamed deltas, and the stores (history, tool calls,
notifications, batches) for the rest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from shared.models.config import ConversationConfig
from shared.models.notifications import Notification
from shared.models.steps import Step
from shared.settings import Settings
from shared.store.batches import BatchStore
from shared.store.conversations import TurnRecord
from shared.store.history import HistoryStore
from shared.store.notifications import NotificationStore
from shared.store.policy import OperatorPolicy
from shared.store.prices import PriceStore
from worker.checkpoint import TurnCheckpoint
from worker.deltas import DeltaFlusher
from worker.lease import Lease
from worker.tool_ledger import ToolLedger
from worker.writer import Writer

__all__ = ["Leg"]


@dataclass
class Leg:
    """One turn's leg on one worker: state in, flushes out."""

    settings: Settings
    config: ConversationConfig
    turn: TurnRecord
    lease: Lease
    writer: Writer
    history: HistoryStore
    tool_calls: ToolLedger
    notifications: NotificationStore
    batches: BatchStore
    checkpoint: TurnCheckpoint
    policy: OperatorPolicy  # the operator's tool rules, read with the claim
    deltas: DeltaFlusher  # the process's ticker, which writes streamed deltas
    prices: PriceStore  # read at each model call: a price applies from the next call
    started: float = field(default_factory=time.monotonic)
    cancelled_at_start: bool = False
    flags: dict[str, str] = field(default_factory=dict)  # the conversation's hash, as claimed
    parked_note: Notification | None = None  # the settled notification it resumes on, as claimed
    _window: list[Step] | None = None
    _window_base: int = 0

    @property
    def cid(self) -> str:
        return self.turn.conversation_id

    @property
    def turn_id(self) -> str:
        return self.turn.turn_id

    def elapsed_s(self) -> float:
        """Running time of the turn so far, across legs, parked time excluded."""
        return self.checkpoint.elapsed_s + (time.monotonic() - self.started)

    def timed_out(self) -> bool:
        return self.elapsed_s() > self.config.limits.timeout_s

    def slice_used(self) -> bool:
        return time.monotonic() - self.started > self.settings.leg_time_slice_s

    def saved_checkpoint(self) -> str:
        """The checkpoint to save, as the JSON the turn's record keeps, with the elapsed time
        brought up to date: a snapshot, which later changes to the leg's do not reach."""
        self.checkpoint.elapsed_s = self.elapsed_s()
        self.started = time.monotonic()
        return self.checkpoint.model_dump_json()

    def cancel_requested(self) -> bool:
        """Whether abort reached this turn: read at the leg's start, then from every flush."""
        return self.cancelled_at_start or self.writer.cancel_seen

    def context(self) -> list[Step]:
        """The context window: read once per leg, then extended with what this leg wrote."""
        if self._window is None:
            self._window = self.history.context_window(self.checkpoint.turn_start)
            # a held flush's steps are not in Redis yet: they follow the window read
            self._window_base = len(self.writer.written) - self.writer.unsent_steps
        return [*self._window, *self.writer.written[self._window_base :]]

    def window_claimed(self, window: list[Step]) -> None:
        """The claim read the window of a turn not yet started: the context is that, then
        what this leg writes, with no round trip of its own (empty for a conversation's
        first turn, as each item of a batch is)."""
        self._window, self._window_base = window, len(self.writer.written)

    def forget_context(self) -> None:
        """After a compaction the window starts again from its summary."""
        self._window = None

    def turn_steps(self) -> list[Step]:
        """This turn's retained steps, from the cached window when it covers the turn start."""
        window = self.context()
        if window and window[0].step_index <= self.checkpoint.turn_start:
            return [s for s in window if s.step_index >= self.checkpoint.turn_start]
        unsent = self.writer.unsent_steps  # a held flush's, last of `written`, not in Redis yet
        held = self.writer.written[len(self.writer.written) - unsent :] if unsent else []
        return [*self.history.steps_since(self.checkpoint.turn_start), *held]
