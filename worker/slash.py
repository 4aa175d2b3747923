"""Slash commands, handled by the runtime and never sent to the model: /compact and /help."""

from __future__ import annotations

from shared.errors import ProviderError
from shared.models.content import SLASH_COMMANDS, SlashCommand
from shared.models.steps import Step
from worker.budget import BudgetRefused
from worker.compaction import compact
from worker.leg import Leg
from worker.metered import Meter
from worker.providers.base import Provider
from worker.terminal import complete_turn, fail_turn

__all__ = ["COMMANDS", "run_command"]

COMMANDS = SLASH_COMMANDS


def run_command(leg: Leg, command: SlashCommand, provider: Provider, meter: Meter) -> None:
    """Runs one command to the end of its turn."""
    if command.name == "help":
        lines = [f"/{name}: {text}" for name, text in COMMANDS.items()]
        leg.checkpoint.final_text = "Slash commands:\n" + "\n".join(lines)
        complete_turn(leg, [Step.to_user(leg.checkpoint.final_text)])
    elif command.name == "compact":
        try:
            compacted = compact(leg, provider, meter)
        except BudgetRefused as exc:
            fail_turn(leg, f"budget_exhausted: {exc}", code="budget_exhausted")
            return
        except ProviderError as exc:
            message = f"compaction failed: {exc}"
            fail_turn(leg, message, code="provider_error", http_code=exc.http_code)
            return
        leg.checkpoint.final_text = f"History compacted: {compacted} steps summarised."
        complete_turn(leg)
    else:
        known = ", ".join(f"/{name}" for name in COMMANDS)
        fail_turn(
            leg,
            f"unknown slash command /{command.name}; known commands: {known}",
            code="unknown_command",
        )
