"""Slash commands, handled by the runtime and never sent to the model: /compact and /help."""

from __future__ import annotations

from shared.models.content import SLASH_COMMANDS, SlashCommand
from shared.models.events import StepEvent
from shared.models.notifications import PassiveEvent
from shared.models.steps import Step, UsageMetadata
from worker.context import build_messages
from worker.flush import Flush
from worker.leg import Leg
from worker.providers.base import Message, ModelRequest, Provider, Role, TextDelta, UsageEvent
from worker.terminal import complete_turn, fail_turn, passive

__all__ = ["COMMANDS", "compact", "run_command"]

COMMANDS = SLASH_COMMANDS
_SUMMARY_INSTRUCTION = (
    "Summarise the conversation so far in a few sentences, "
    "keeping facts, decisions and open questions."
)


def run_command(leg: Leg, command: SlashCommand, provider: Provider) -> None:
    """Runs one command to the end of its turn."""
    if command.name == "help":
        lines = [f"/{name}: {text}" for name, text in COMMANDS.items()]
        leg.checkpoint.final_text = "Slash commands:\n" + "\n".join(lines)
        complete_turn(leg, [Step.to_user(leg.checkpoint.final_text)])
    elif command.name == "compact":
        compacted = compact(leg, provider)
        leg.checkpoint.final_text = f"History compacted: {compacted} steps summarised."
        complete_turn(leg)
    else:
        known = ", ".join(f"/{name}" for name in COMMANDS)
        fail_turn(
            leg,
            f"unknown slash command /{command.name}; known commands: {known}",
            code="unknown_command",
        )


def compact(leg: Leg, provider: Provider) -> int:
    """Asks the model for a summary and records it as a Compaction step; returns steps covered."""
    window = leg.context()
    messages = (
        *build_messages(leg.config.system_prompt, window),
        Message(Role.USER, _SUMMARY_INSTRUCTION),
    )
    summary, usage = _collect(provider, ModelRequest(model=leg.config.model, messages=messages))
    step = Step.compaction(
        summary, turn_id=leg.turn_id, index=leg.writer.next_position, usage=usage
    )
    leg.checkpoint.usage = leg.checkpoint.usage + (usage or UsageMetadata())
    event = StepEvent(
        conversation_id=leg.cid, turn_id=leg.turn_id, step_index=step.step_index, step=step
    )
    leg.forget_context()
    notice = passive(leg, PassiveEvent.COMPACTION, f"History compacted ({len(window)} steps)")
    leg.writer.write(
        Flush(
            deliveries=[notice],
            steps=[step],
            usage=usage,
            events=[event],
            checkpoint=leg.saved_checkpoint(),
        )
    )
    return len(window)


def _collect(provider: Provider, request: ModelRequest) -> tuple[str, UsageMetadata | None]:
    text: list[str] = []
    usage: UsageMetadata | None = None
    for event in provider.stream(request):
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, UsageEvent):
            usage = event.usage
    return "".join(text).strip(), usage
