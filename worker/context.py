"""Building the model's context from history: pure, no I/O.

The store hands over a window: the last compaction (whose summary stands in for
everything before it) or the current turn's start, whichever is earlier, to the
end. The context is the system prompt, the summary, then the window's other
steps. Media reaches the model only in the turn that sent it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from shared.models.content import Content
from shared.models.steps import Step, StepSource, StepTarget, StepType
from worker.providers.base import Message, Role, ToolSpec

__all__ = [
    "MESSAGE_TOKENS",
    "SUMMARY_PREFIX",
    "build_messages",
    "estimate_tokens",
    "estimate_tool_tokens",
]

SUMMARY_PREFIX = "Summary of the conversation so far: "


def build_messages(
    system_prompt: str, steps: Sequence[Step], *, prompt: Content | None = None
) -> tuple[Message, ...]:
    """Messages for the model; `prompt` puts the current turn's media on its user message."""
    messages: list[Message] = [Message(Role.SYSTEM, system_prompt)] if system_prompt else []
    last_user = -1
    summary = next((s for s in reversed(steps) if s.type is StepType.COMPACTION), None)
    if summary is not None:
        messages.append(Message(Role.SYSTEM, SUMMARY_PREFIX + summary.content))
    for step in steps:
        message = _message_for(step)
        if message is None:
            continue
        if message.role is Role.USER and step.type is StepType.USER_INPUT:
            last_user = len(messages)
        messages.append(message)
    if prompt is not None and prompt.media and last_user >= 0:
        user = messages[last_user]
        messages[last_user] = Message(Role.USER, user.content, media=tuple(prompt.media))
    return tuple(messages)


def _message_for(step: Step) -> Message | None:
    if step.type is StepType.USER_INPUT:
        return None if step.command else Message(Role.USER, step.content)
    if step.source is StepSource.MODEL and step.type in (
        StepType.TEXT_RESPONSE,
        StepType.TOOL_CALL,
    ):
        return Message(Role.ASSISTANT, step.content, tool_calls=tuple(step.tool_calls))
    if step.type is StepType.TOOL_RESULT and step.tool_calls:
        call = step.tool_calls[0]
        return Message(Role.TOOL, step.content, tool_call_id=call.id, name=call.name)
    if step.type is StepType.SYSTEM_MESSAGE and step.target is StepTarget.ENVIRONMENT:
        return Message(
            Role.USER, step.content
        )  # an instruction to the model, e.g. a repair request
    return None


MESSAGE_TOKENS = 4  # what a chat template adds around each message (OpenAI's: 3 or 4)


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A cheap context size estimate: about four characters a token, and each message's share
    of the chat template (a long conversation of short messages is mostly template)."""
    chars = sum(len(m.content) + _calls_chars(m) for m in messages)
    return chars // 4 + MESSAGE_TOKENS * len(messages) + 1


def _calls_chars(message: Message) -> int:
    """The length of the message's tool calls' arguments as JSON ("[]" without any)."""
    return len(json.dumps([c.args for c in message.tool_calls])) if message.tool_calls else 2


def estimate_tool_tokens(tools: Sequence[ToolSpec]) -> int:
    """The estimate of the tools' definitions, which a prompt carries beside its messages.

    Kept per process by each tool's name, description and schema object (held by the entry,
    so its id is not reused): a worker's legs offer the same few sets of tools."""
    key = tuple((t.name, t.description, id(t.parameters)) for t in tools)
    found = _TOOL_ESTIMATES.get(key)
    if found is None:
        specs = json.dumps([[t.name, t.description, t.parameters] for t in tools]) if tools else ""
        if len(_TOOL_ESTIMATES) >= _TOOL_ESTIMATES_KEPT:
            _TOOL_ESTIMATES.clear()
        found = _TOOL_ESTIMATES[key] = (len(specs) // 4, [t.parameters for t in tools])
    return found[0]


_TOOL_ESTIMATES: dict[tuple[tuple[str, str, int], ...], tuple[int, list[object]]] = {}
_TOOL_ESTIMATES_KEPT = 256
