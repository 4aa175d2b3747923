"""Forking a conversation: a new one whose history is the original's first K steps.

The copy keeps the steps as stored, their turn starts and compaction positions (relative to
the first retained step, as every read reports them) and the usage the copied steps carry;
its configuration is the original's (gate fields included) or, given an agent version, that
agent's. The cut must not part a tool call from its result: such an `at_step` is refused
(InvalidInput naming it), never moved. Creation and the copy are one MULTI, so a fork is
whole or absent; the original is only read.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.exceptions import WatchError

from shared.errors import Conflict, InvalidInput
from shared.models.config import ConversationConfig, ConversationOptions
from shared.models.steps import Step, StepType, UsageMetadata
from shared.store.agents import resolve_options
from shared.store.bundle import Stores
from shared.store.connection import storage_errors
from shared.store.conversations import new_id
from shared.store.history import HistorySnapshot
from shared.store.keys import check_id

__all__ = ["ForkSegment", "cut_history", "fork_config", "fork_conversation"]


@dataclass(frozen=True)
class ForkSegment:
    """Steps appended together: a turn's (`start_turn`), or those before the first turn."""

    steps: list[Step]
    start_turn: bool

    @property
    def usage(self) -> UsageMetadata | None:
        """The steps' usage: a Finish step's is its whole turn's, so it replaces its calls'."""
        done, pending = UsageMetadata(), UsageMetadata()
        for step in self.steps:
            if step.usage_metadata is None:
                continue
            if step.type is StepType.FINISH:
                done, pending = done + step.usage_metadata, UsageMetadata()
            else:
                pending = pending + step.usage_metadata
        total = done + pending
        return None if total.is_zero() else total


def cut_history(snapshot: HistorySnapshot, at_step: int) -> list[ForkSegment]:
    """The first `at_step` retained steps in turn segments; InvalidInput naming `at_step`."""
    if at_step > len(snapshot.steps):
        raise InvalidInput(
            f"at_step: {at_step} is beyond the history's {len(snapshot.steps)} steps"
        )
    kept = snapshot.steps[:at_step]
    _check_calls_answered(kept, at_step)
    bounds = sorted({0, *(i for i in snapshot.turn_start_indices if 0 <= i < at_step)})
    starts = set(snapshot.turn_start_indices)
    return [
        ForkSegment(kept[a:b], start_turn=a in starts)
        for a, b in zip(bounds, [*bounds[1:], at_step], strict=True)
        if b > a or a in starts
    ]


def _check_calls_answered(steps: list[Step], at_step: int) -> None:
    """A tool call kept without its result would leave the model a question unanswered."""
    answered = {
        call.id for step in steps if step.type is StepType.TOOL_RESULT for call in step.tool_calls
    }
    for position, step in enumerate(steps):
        if step.type is not StepType.TOOL_CALL:
            continue
        missing = [call.id for call in step.tool_calls if call.id not in answered]
        if missing:
            raise InvalidInput(
                f"at_step: {at_step} cuts between the tool call at step {position} and its "
                f"result ({', '.join(missing)}); fork at {position} or after the result"
            )


def fork_config(
    stores: Stores,
    original: ConversationConfig,
    *,
    agent: str | None = None,
    agent_version: int | None = None,
) -> ConversationConfig:
    """The original's configuration, or an agent's (that agent never loosens the policy)."""
    if agent is None and agent_version is None:
        return original.model_copy(update={"batch_id": None, "submitted_by": None})
    name = agent or original.agent
    if name is None:
        raise InvalidInput("agent_version: the original runs as no agent; name one")
    options = ConversationOptions(agent=name, agent_version=agent_version)
    return resolve_options(options, stores.settings, policy_may_loosen=False, agents=stores.agents)


def fork_conversation(
    stores: Stores,
    cid: str,
    *,
    at_step: int,
    config: ConversationConfig,
    owner: str,
    conversation_id: str | None = None,
) -> str:
    """Creates the fork with its copied history in one MULTI; returns its id."""
    segments = cut_history(stores.history(cid).snapshot(), at_step)
    new = check_id(conversation_id or new_id(), "conversation id")
    history = stores.history(new, max_history_size=config.max_history_size)
    key = stores.keys.conversation(new)
    with (
        storage_errors(f"forking conversation {cid}"),
        stores.redis.pipeline(transaction=True) as pipe,
    ):
        try:
            pipe.watch(key)
            if pipe.exists(key):
                raise Conflict(f"conversation {new} already exists")
            pipe.multi()
            stores.conversations.queue_create(pipe, new, config, owner=owner)
            for segment in segments:
                history.append(
                    *segment.steps,
                    usage=segment.usage,
                    start_turn=segment.start_turn,
                    pipeline=pipe,
                )
            pipe.execute()
        except WatchError:
            raise Conflict(f"conversation {new} already exists") from None
    return new
