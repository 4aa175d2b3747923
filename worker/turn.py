"""A turn as a state machine: start, call the model, run tools, and end.

Each phase ends with a flush that saves the checkpoint with the steps it wrote,
so a leg can stop after any phase (a time slice, a crash) and another worker
continues from exactly there.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from enum import Enum

from shared.errors import ProviderError, RateLimited
from shared.models.config import ToolSelection
from shared.models.events import (
    ConversationStatus,
    EventBase,
    StepEvent,
    TurnStartedEvent,
    TurnStatus,
)
from shared.models.steps import Step, StepStatus, StepType, ToolCall, UsageMetadata
from shared.schema import parse_json_answer, schema_violations
from shared.store.rate_limit import RateLimiter
from worker import observe
from worker.budget import BudgetRefused
from worker.checkpoint import Phase
from worker.compaction import calibration, compact
from worker.context import build_messages, estimate_tokens, estimate_tool_tokens
from worker.context_size import MIN_OUTPUT_TOKENS, ContextSize, within_room
from worker.flush import Flush
from worker.leg import Leg
from worker.metered import Meter
from worker.providers.base import Message, ModelRequest, Provider, ToolSpec
from worker.providers.registry import ProviderFactory
from worker.slash import run_command
from worker.spend import call_usage
from worker.streaming import ModelOutput, StepStreamer
from worker.terminal import cancel_turn, complete_turn, fail_turn
from worker.tool_phase import ToolPhase, policy_for, run_pending_tools
from worker.tools import ToolRegistry
from worker.writer import LeaseLost

__all__ = ["LegOutcome", "TurnMachine"]


@dataclass(frozen=True)
class _Call:
    """A model call under way: its request, and when it began (monotonic, and Unix ns)."""

    request: ModelRequest
    started: float
    started_ns: int


class LegOutcome(str, Enum):
    FINISHED = "finished"
    YIELDED = "yielded"
    PARKED = "parked"


class TurnMachine:
    """Drives one turn from its checkpoint until it ends, parks, or its slice is used."""

    def __init__(
        self,
        leg: Leg,
        registry: ToolRegistry,
        providers: ProviderFactory,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.leg = leg
        self.registry = registry
        self.providers = providers
        self.limiter = limiter
        self.meter = Meter(leg, limiter)
        self._tool_estimates: dict[tuple[str, ...], int] = {}
        self._enabled_tools: list[str] | None = None

    def run(self) -> LegOutcome:
        leg = self.leg
        while True:
            if leg.checkpoint.phase is not Phase.START and leg.cancel_requested():
                cancel_turn(leg)
                return LegOutcome.FINISHED
            if leg.timed_out():
                fail_turn(
                    leg, f"turn timed out after {leg.config.limits.timeout_s:g}s", code="timeout"
                )
                return LegOutcome.FINISHED
            if leg.slice_used():
                leg.writer.write(Flush(checkpoint=leg.saved_checkpoint()))
                return LegOutcome.YIELDED
            outcome = self._advance_phase()
            if outcome is not None:
                return outcome

    def _advance_phase(self) -> LegOutcome | None:
        """Runs the current phase; the leg's outcome when it ends here, else None."""
        phase = self.leg.checkpoint.phase
        if phase is Phase.RUN_TOOLS:
            return self._run_tools()
        if phase is Phase.START:
            ended = self._start()
        elif phase is Phase.COMMAND:
            ended = self._command()
        elif phase is Phase.CALL_MODEL:
            ended = self._call_model()
        else:
            ended = self._after_response()
        return LegOutcome.FINISHED if ended else None

    def _run_tools(self) -> LegOutcome | None:
        result = run_pending_tools(self.leg, self.registry)
        if result is ToolPhase.CANCELLED:
            cancel_turn(self.leg)
            return LegOutcome.FINISHED
        return LegOutcome.PARKED if result is ToolPhase.PARKED else None

    def _start(self) -> bool:
        leg, prompt = self.leg, self.leg.turn.prompt
        command = prompt.slash_command
        text = f"/{command.name} {command.args}".strip() if command else prompt.text
        step = Step.user_input(
            text,
            turn_id=leg.turn_id,
            index=leg.writer.next_position,
            command=command.name if command else "",
        )
        leg.checkpoint.turn_start = step.step_index
        leg.checkpoint.phase = Phase.COMMAND if command else Phase.CALL_MODEL
        events: list[EventBase] = [
            TurnStartedEvent(
                conversation_id=leg.cid, turn_id=leg.turn_id, step_index=step.step_index
            ),
            StepEvent(
                conversation_id=leg.cid, turn_id=leg.turn_id, step_index=step.step_index, step=step
            ),
        ]
        start = Flush(
            steps=[step],
            start_turn=True,
            events=events,
            turn_status=TurnStatus.RUNNING,
            started_at=time.time(),
            checkpoint=leg.saved_checkpoint(),
            conversation_status=ConversationStatus.RUNNING,
        )
        if command:
            leg.writer.write(start)
        else:  # it goes out with the model call's reservation, in one round trip
            leg.writer.hold(start)
        observe.turn_started(leg)
        return False

    def _command(self) -> bool:
        command = self.leg.turn.prompt.slash_command
        assert command is not None  # the START phase only chooses COMMAND for a slash command
        provider = self._provider()
        if provider is not None:
            run_command(self.leg, command, provider, self.meter)
        return True

    def _provider(self) -> Provider | None:
        try:
            return self.providers.get(self.leg.config.provider)
        except ProviderError as exc:
            fail_turn(self.leg, str(exc), code="provider_error", http_code=exc.http_code)
            return None

    def _call_model(self) -> bool:
        provider = self._provider()
        request = None if provider is None else self._request(provider)
        if provider is None or request is None:
            return True
        try:
            reservation = self.meter.reserve(request)
        except BudgetRefused as exc:
            fail_turn(self.leg, f"budget_exhausted: {exc}", code="budget_exhausted")
            return True
        estimate = estimate_tokens(request.messages)
        if self.leg.cancel_requested():  # seen by the flush the reservation carried
            self.meter.settle(reservation, None, estimate)
            cancel_turn(self.leg)
            return True
        called = self.meter.limited(
            estimate, reservation.paused_ms, lambda: self._stream(provider, request)
        )
        if isinstance(called, ProviderError):
            self.meter.settle(reservation, None, estimate)
            fail_turn(
                self.leg,
                f"model call failed: {called}",
                code="provider_error",
                http_code=called.http_code,
            )
            return True
        streamer, output, call = called
        output.usage = call_usage(reservation.price, request, output)
        self._observe_call(streamer, call, output)
        self.meter.settle(reservation, output.usage, estimate)
        tool_tokens = self._tool_tokens(request.tools)
        self._calibrate(estimate_tokens(request.messages) + tool_tokens, output.usage)
        if output.stopped:
            return self._stopped(streamer, output)
        return self._record_response(streamer, output, tools_offered=bool(request.tools))

    def _stream(
        self, provider: Provider, request: ModelRequest
    ) -> tuple[StepStreamer, ModelOutput, _Call]:
        """One attempt at the call, streamed as it comes; a failure is counted and raised."""
        streamer = StepStreamer(
            self.leg.writer,
            self.leg.deltas,
            step_index=self.leg.writer.next_position,
            should_stop=self._must_stop,
        )
        call = _Call(request, time.monotonic(), time.time_ns())
        try:
            return streamer, streamer.run(provider.stream(request)), call
        except ProviderError as exc:
            outcome = "rate_limited" if isinstance(exc, RateLimited) else "error"
            self._observe_call(streamer, call, None, error=str(exc), outcome=outcome)
            raise

    def _calibrate(self, estimate: int, usage: UsageMetadata | None) -> None:
        """Keeps what the provider counted of this prompt, to size the next ones."""
        if usage is not None and usage.prompt_token_count > 0 and not usage.estimated_calls:
            cp = self.leg.checkpoint
            cp.counted_prompt_tokens = usage.prompt_token_count
            cp.estimated_prompt_tokens = estimate

    def _observe_call(
        self,
        streamer: StepStreamer,
        call: _Call,
        output: ModelOutput | None,
        *,
        error: str = "",
        outcome: str = "",
    ) -> None:
        first = streamer.first_event_at
        if not outcome:
            outcome = "error" if output is None else "stopped" if output.stopped else "ok"
        observe.model_call(
            self.leg,
            outcome=outcome,
            started_ns=call.started_ns,
            duration_s=time.monotonic() - call.started,
            first_token_s=None if first is None else first - call.started,
            usage=None if output is None else output.usage,
            finish_reason="" if output is None else output.finish_reason,
            error=error,
            messages=call.request.messages,
            answer="" if output is None else output.content,
        )

    def _must_stop(self) -> bool:
        if self.leg.lease.lost.is_set():
            raise LeaseLost(f"lease of conversation {self.leg.cid} was lost mid-stream")
        return self.leg.timed_out()

    def _request(self, provider: Provider) -> ModelRequest | None:
        """The next call, its context compacted if it nears the model's window; None when the
        turn ended instead (the context cannot fit, or its compaction failed)."""
        leg, cp = self.leg, self.leg.checkpoint
        limits = leg.config.limits
        disabled = (
            cp.tools_disabled
            or cp.model_calls + 1 >= limits.max_model_calls
            or leg.config.tool_selection is ToolSelection.NONE
        )
        tools = () if disabled else self.registry.specs(self._tool_names())
        selection = (
            ToolSelection.NONE
            if disabled or not tools
            else (leg.config.tool_selection if cp.model_calls == 0 else ToolSelection.AUTO)
        )
        fitted = self._fitted(provider, tools)
        if fitted is None:
            return None
        messages, cap = fitted
        return ModelRequest(
            model=leg.config.model,
            messages=messages,
            tools=tools,
            tool_selection=selection,
            response_schema=leg.config.response_schema,
            settings=within_room(leg.config.provider, leg.config.model_settings, cap),
        )

    def _fitted(
        self, provider: Provider, tools: tuple[ToolSpec, ...]
    ) -> tuple[tuple[Message, ...], int] | None:
        """The context and the answer's cap within the window, compacted first when its prompt
        passes the compaction point; None when the turn ended (context_overflow)."""
        leg = self.leg
        tool_tokens = self._tool_tokens(tools)
        size, calibrated = ContextSize.of(leg.config, leg.settings), calibration(leg, tool_tokens)
        least = min(MIN_OUTPUT_TOKENS, leg.config.model_settings.max_output_tokens or 256)
        messages = self._messages()
        estimate = estimate_tokens(messages) + tool_tokens
        predicted = calibrated.predict(estimate)
        near = predicted > size.compact_at or size.room(predicted) < least
        compacting = near and self._has_earlier_turns()
        if compacting:
            # what no compaction shortens: the turn itself, as the summary would follow it
            turn_only = build_messages(leg.config.system_prompt, leg.turn_steps())
            estimate = estimate_tokens(turn_only) + tool_tokens
            if size.room(calibrated.predict(estimate)) >= least:
                if not self._compact(provider):
                    return None
                messages = self._messages()
                estimate = estimate_tokens(messages) + tool_tokens
        prompt = calibrated.predict(estimate)
        if size.room(prompt) < least:
            message = _overflow(leg, size, prompt, least, compacted=compacting)
            fail_turn(leg, message, code="context_overflow")
            return None
        return messages, size.answer_cap(estimate, calibrated)

    def _compact(self, provider: Provider) -> bool:
        """Compacts the context; False when the turn ended because it could not."""
        try:
            compact(self.leg, provider, self.meter)
        except BudgetRefused as exc:
            fail_turn(self.leg, f"budget_exhausted: {exc}", code="budget_exhausted")
            return False
        except ProviderError as exc:
            message = f"compaction failed: {exc}"
            fail_turn(self.leg, message, code="provider_error", http_code=exc.http_code)
            return False
        return True

    def _tool_tokens(self, tools: tuple[ToolSpec, ...]) -> int:
        """The tools' definitions' estimate, made once per leg for the tools it offers."""
        names = tuple(tool.name for tool in tools)
        if names not in self._tool_estimates:
            self._tool_estimates[names] = estimate_tool_tokens(tools)
        return self._tool_estimates[names]

    def _tool_names(self) -> list[str]:
        """The tools offered to the model: decided once per leg (the policies it reads are)."""
        if self._enabled_tools is None:
            leg, registry = self.leg, self.registry
            names = registry.names()
            self._enabled_tools = [n for n in names if policy_for(leg, registry, n) is not None]
        return self._enabled_tools

    def _messages(self) -> tuple[Message, ...]:
        window = self.leg.context()
        return build_messages(self.leg.config.system_prompt, window, prompt=self.leg.turn.prompt)

    def _has_earlier_turns(self) -> bool:
        turn_start = self.leg.checkpoint.turn_start
        window = self.leg.context()
        return any(s.step_index < turn_start and s.type is not StepType.COMPACTION for s in window)

    def _stopped(self, streamer: StepStreamer, output: ModelOutput) -> bool:
        partial = self._response_step(streamer, output, status=StepStatus.CANCELED)
        pending = streamer.take_pending()
        if pending is not None:
            self.leg.writer.write(Flush(events=[pending]))
        if streamer.cancel_requested or self.leg.cancel_requested():
            cancel_turn(self.leg, partial=partial)
        else:
            limit = self.leg.config.limits.timeout_s
            fail_turn(self.leg, f"turn timed out after {limit:g}s", code="timeout", extra=[partial])
        return True

    def _response_step(
        self, streamer: StepStreamer, output: ModelOutput, *, status: StepStatus
    ) -> Step:
        calls = [self._with_path(c) for c in output.tool_calls]
        return Step.model_response(
            turn_id=self.leg.turn_id,
            index=streamer.step_index,
            status=status,
            content=output.content,
            thinking=output.thinking,
            tool_calls=calls,
            usage=output.usage,
        )

    def _with_path(self, call: ToolCall) -> ToolCall:
        path = self.registry.canonical_path(call, self.leg.settings)
        return call.model_copy(update={"canonical_path": path}) if path else call

    def _record_response(
        self, streamer: StepStreamer, output: ModelOutput, *, tools_offered: bool
    ) -> bool:
        leg, cp = self.leg, self.leg.checkpoint
        if not tools_offered:
            output.tool_calls = []
        step = self._response_step(streamer, output, status=StepStatus.DONE)
        cp.model_calls += 1
        if output.usage is not None:
            cp.usage = cp.usage + output.usage
        extra = self._next_phase(step)
        events: list[EventBase] = []
        pending = streamer.take_pending()
        if pending is not None:
            events.append(pending)
        if cp.phase is Phase.FINISH and not cp.failure:
            complete_turn(leg, [step], leading=events, usage=output.usage)
            return True
        steps = [step, *extra]
        for offset, s in enumerate(steps):
            s.step_index = streamer.step_index + offset
            events.append(
                StepEvent(
                    conversation_id=leg.cid, turn_id=leg.turn_id, step_index=s.step_index, step=s
                )
            )
        flush = Flush(
            steps=steps, usage=output.usage, events=events, checkpoint=leg.saved_checkpoint()
        )
        if cp.phase is Phase.RUN_TOOLS:  # it goes out with the first call's claim (or park)
            leg.writer.hold(flush)
        else:
            leg.writer.write(flush)
        return self._after_response()

    def _next_phase(self, step: Step) -> list[Step]:
        """Chooses what follows a model response; returns any step to append with it."""
        cp = self.leg.checkpoint
        if step.tool_calls:
            cp.pending_calls = list(step.tool_calls)
            cp.phase = Phase.RUN_TOOLS
            return []
        schema = self.leg.config.response_schema
        cp.final_text = step.content
        if schema is None:
            cp.phase = Phase.FINISH
            return []
        return self._check_structured(step.content, schema)

    def _check_structured(self, content: str, schema: dict) -> list[Step]:
        cp = self.leg.checkpoint
        try:
            value = parse_json_answer(content)
            problems = schema_violations(value, schema)
        except ValueError as exc:
            value, problems = None, [f"$: not JSON ({exc})"]
        if not problems:
            cp.structured_output, cp.phase = value, Phase.FINISH
            return []
        cp.phase = Phase.CALL_MODEL if not cp.repair_attempted else Phase.FINISH
        if cp.repair_attempted:
            cp.failure = "structured output is invalid against the response schema: " + "; ".join(
                problems
            )
            return []
        cp.repair_attempted = True
        instruction = (
            "Your answer is not valid against the required JSON schema: "
            + "; ".join(problems)
            + ". Reply again with only a JSON document valid against this schema: "
            + json.dumps(schema)
        )
        return [Step.to_model(instruction, id=f"{self.leg.turn_id}-repair")]

    def _after_response(self) -> bool:
        cp = self.leg.checkpoint
        if cp.phase is not Phase.FINISH:
            return False
        if cp.failure:
            fail_turn(self.leg, cp.failure, code="invalid_structured_output")
        else:
            complete_turn(self.leg)
        return True


def _overflow(leg: Leg, size: ContextSize, prompt: int, least: int, *, compacted: bool) -> str:
    """The turn's error when its context cannot fit the model's window."""
    config = leg.config
    how = "even compacted" if compacted else "with nothing left to compact"
    return (
        f"context_overflow: the context needs about {prompt:,} tokens, {how}, and the "
        f"{size.tokens:,}-token window of {config.provider}:{config.model} would leave less "
        f"than the {least:,} an answer needs; give the model a larger context "
        "(SIGNOFF_CONTEXT_SIZES, or the agent's context_tokens) or start a new conversation"
    )
