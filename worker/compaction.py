"""Compaction: a summary that stands in for the context so far, made in pieces that fit the
model's window, each piece's call reserved, rate-limited and counted like any other.

The window is cut into pieces whose prompts fit the window less the summary's own room (a
quarter of it); each piece is summarised with the summary so far in front of it, so a context
of any length becomes one summary, and a single step too long for a piece is cut. The
summary is written as one Compaction step carrying the usage of every piece's call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from shared.models.events import StepEvent
from shared.models.notifications import PassiveEvent
from shared.models.steps import Step, UsageMetadata
from worker.context import build_messages, estimate_tokens
from worker.context_size import (
    Calibration,
    ContextSize,
    cut_to,
    learnt_calibration,
    step_tokens,
    within_room,
)
from worker.flush import Flush
from worker.leg import Leg
from worker.metered import Meter
from worker.providers.base import Message, ModelRequest, Provider, Role
from worker.terminal import passive

__all__ = ["SUMMARY_INSTRUCTION", "calibration", "compact"]

SUMMARY_INSTRUCTION = (
    "Summarise the conversation so far in a few sentences, "
    "keeping facts, decisions and open questions."
)


def compact(leg: Leg, provider: Provider, meter: Meter) -> int:
    """Summarises the window and records it as a Compaction step; returns the steps covered.
    Raises BudgetRefused or ProviderError when a piece's call cannot be made."""
    window = leg.context()
    size = ContextSize.of(leg.config, leg.settings)
    summary_room = max(size.tokens // 4, 1)
    fixed = estimate_tokens(build_messages(leg.config.system_prompt, [])) + _INSTRUCTION_TOKENS
    # a piece's prompt leaves room for the summary so far in front of it, and for the answer
    room = calibration(leg).estimate_within(size.tokens - 2 * summary_room) - fixed
    summary, usage = "", UsageMetadata()
    for piece in _pieces(window, max(room, 16)):
        earlier = [_summary_step(leg, summary)] if summary else []
        messages = (
            *build_messages(leg.config.system_prompt, [*earlier, *piece]),
            Message(Role.USER, SUMMARY_INSTRUCTION),
        )
        output = meter.collect(provider, _request(leg, messages, summary_room))
        summary, usage = output.content, usage + (output.usage or UsageMetadata())
    _record(leg, summary, usage, len(window))
    return len(window)


def calibration(leg: Leg, tool_tokens: int = 0) -> Calibration:
    """The turn's last call the provider counted, else the window's last (taken to have been
    offered tools of `tool_tokens`, as the next call is)."""
    cp = leg.checkpoint
    if cp.counted_prompt_tokens and cp.estimated_prompt_tokens:
        return Calibration(cp.counted_prompt_tokens, cp.estimated_prompt_tokens)
    return learnt_calibration(leg.config.system_prompt, leg.context(), extra=tool_tokens)


_INSTRUCTION_TOKENS = estimate_tokens([Message(Role.USER, SUMMARY_INSTRUCTION)])


def _pieces(window: Sequence[Step], room: int) -> Iterator[list[Step]]:
    """The window in order, in runs whose estimated prompts fit `room` (a step too long alone
    is cut to fit)."""
    piece: list[Step] = []
    used = 0
    for step in window:
        tokens = step_tokens(step)
        if tokens > room:
            step = cut_to(step, room)
            tokens = step_tokens(step)
        if piece and used + tokens > room:
            yield piece
            piece, used = [], 0
        piece.append(step)
        used += tokens
    if piece or not window:
        yield piece


def _summary_step(leg: Leg, summary: str) -> Step:
    """The summary so far, in front of the next piece (never written)."""
    return Step.compaction(summary, turn_id=leg.turn_id, index=leg.writer.next_position)


def _request(leg: Leg, messages: tuple[Message, ...], room: int) -> ModelRequest:
    """The summary's call: the conversation's settings, its answer kept within `room`."""
    settings = within_room(leg.config.provider, leg.config.model_settings, room)
    return ModelRequest(model=leg.config.model, messages=messages, settings=settings)


def _record(leg: Leg, summary: str, usage: UsageMetadata, covered: int) -> None:
    index = leg.writer.next_position
    step = Step.compaction(summary, turn_id=leg.turn_id, index=index, usage=usage)
    leg.checkpoint.usage = leg.checkpoint.usage + usage
    event = StepEvent(
        conversation_id=leg.cid, turn_id=leg.turn_id, step_index=step.step_index, step=step
    )
    leg.forget_context()
    notice = passive(leg, PassiveEvent.COMPACTION, f"History compacted ({covered} steps)")
    leg.writer.write(
        Flush(
            deliveries=[notice],
            steps=[step],
            usage=usage,
            events=[event],
            checkpoint=leg.saved_checkpoint(),
        )
    )
