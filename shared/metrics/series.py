"""Every series Signoff records, in one place: names, help, labels and buckets.

Defined at import, as prometheus-client's model has it: a series is a name the processes
share, and in multiprocess mode each value lives in the process's file under the run's
directory (`shared/metrics/runs.py`), so nothing here is state of one process that another
needs. Every series has a label, so its values are made at first use, once the run's
directory is known. Label values are names (agents, models, tools, outcomes), never ids.

The gauges read from Redis when the web is scraped are in `shared/metrics/state.py`.
"""

from __future__ import annotations

from typing import TypeVar

from prometheus_client import Counter, Histogram
from prometheus_client.metrics import MetricWrapperBase

from shared.metrics.labels import BoundedLabel

__all__ = [
    "AGENT",
    "APPROVALS_REQUESTED",
    "APPROVAL_WAIT",
    "HTTP_REQUESTS",
    "LEGS",
    "MODEL",
    "MODEL_CALLS",
    "MODEL_CALL_DURATION",
    "MODEL_COST",
    "MODEL_FIRST_TOKEN",
    "MODEL_TOKENS",
    "NOTIFICATION_DELIVERIES",
    "PROVIDER",
    "REDIS_SCRIPT_DURATION",
    "ROUTE",
    "SCHEDULE_FIRE_LAG",
    "TOOL",
    "TOOL_CALLS",
    "TURNS_ENDED",
    "TURNS_STARTED",
    "TURN_DURATION",
    "TURN_FAILURES",
    "WEBHOOK_DELIVERIES",
    "child",
]

M = TypeVar("M", bound=MetricWrapperBase)
_CHILDREN: dict[tuple[MetricWrapperBase, tuple[str, ...]], MetricWrapperBase] = {}


def child(metric: M, *values: str) -> M:
    """The metric's series for these label values, as `labels` gives it, kept per process:
    `labels` checks and converts its values at every call, several times a turn in a worker.
    Made at first use, as `labels` makes it; values are bounded names (see above)."""
    key = (metric, values)
    found = _CHILDREN.get(key)
    if found is None:
        found = _CHILDREN[key] = metric.labels(*values)
    return found  # type: ignore[return-value]


# Bounded label values (shared/metrics/labels.py), one per kind of name.
AGENT = BoundedLabel("agent")
MODEL = BoundedLabel("model")
PROVIDER = BoundedLabel("provider")
TOOL = BoundedLabel("tool")
ROUTE = BoundedLabel("route")

_TURN_S = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
_CALL_S = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)
_WAIT_S = (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86_400, 3 * 86_400)
_LAG_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 15, 60, 300)
_REDIS_S = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)

# Turns (worker)
TURNS_STARTED = Counter(
    "signoff_turns_started_total", "Turns a worker started.", ["agent", "model"]
)
TURNS_ENDED = Counter(
    "signoff_turns_ended_total",
    "Turns that ended: completed, failed or cancelled.",
    ["agent", "model", "status"],
)
TURN_FAILURES = Counter(
    "signoff_turn_failures_total",
    "Failed turns by why (timeout, provider_error, budget_exhausted, ...).",
    ["agent", "model", "code"],
)
TURN_DURATION = Histogram(
    "signoff_turn_duration_seconds",
    "Running time of a turn from its start to its end, time parked for a person excluded.",
    ["agent", "model", "status"],
    buckets=_TURN_S,
)
LEGS = Counter(
    "signoff_legs_total",
    "Legs (advance tasks) by outcome: finished, parked, yielded, lost, busy, idle...",
    ["outcome"],
)

# Model calls (worker)
MODEL_CALLS = Counter(
    "signoff_model_calls_total",
    "Model calls by outcome: ok, error (the provider failed), rate_limited (a 429: the "
    "provider is paused and the call made again), stopped (abort or timeout).",
    ["provider", "model", "outcome"],
)
MODEL_CALL_DURATION = Histogram(
    "signoff_model_call_duration_seconds",
    "One model call, from the request to the end of its stream.",
    ["provider", "model"],
    buckets=_CALL_S,
)
MODEL_FIRST_TOKEN = Histogram(
    "signoff_model_time_to_first_token_seconds",
    "From a model call's request to its first streamed text, thinking or tool call.",
    ["provider", "model"],
    buckets=_CALL_S,
)
MODEL_TOKENS = Counter(
    "signoff_model_tokens_total",
    "Tokens of model calls (estimated where the server reported none).",
    ["model", "direction"],
)
MODEL_COST = Counter(
    "signoff_model_cost_total",
    "What model calls cost, in the currency of the models' prices.",
    ["model"],
)

# Tools and approvals (worker)
TOOL_CALLS = Counter(
    "signoff_tool_calls_total",
    "Tool calls by outcome: auto, allowed, allowed_with_edits, answered, denied, expired, "
    "cancelled, failed.",
    ["tool", "outcome"],
)
APPROVALS_REQUESTED = Counter(
    "signoff_approvals_requested_total",
    "Requests filed for a person (a tool call to allow, or a question).",
    ["tool"],
)
APPROVAL_WAIT = Histogram(
    "signoff_approval_wait_seconds",
    "From a request's filing to its decision, as its turn goes on with it.",
    ["tool", "decision"],
    buckets=_WAIT_S,
)

# Deliveries (worker)
WEBHOOK_DELIVERIES = Counter(
    "signoff_webhook_deliveries_total",
    "Webhook delivery attempts: succeeded, retrying (failed, tried again), failed (given up).",
    ["outcome"],
)
NOTIFICATION_DELIVERIES = Counter(
    "signoff_notification_deliveries_total",
    "Approval emails and Slack posts by outcome: sent, failed, skipped (already decided).",
    ["channel", "outcome"],
)

# Schedules (beat)
SCHEDULE_FIRE_LAG = Histogram(
    "signoff_schedule_fire_lag_seconds",
    "From a schedule's due time to its fire (or its skip, when missed).",
    ["outcome"],
    buckets=_LAG_S,
)

# Redis (every process)
REDIS_SCRIPT_DURATION = Histogram(
    "signoff_redis_script_duration_seconds",
    "A Lua script's round trip as the process sees it (EVALSHA to reply), by script file: "
    "nearly every write of Signoff is one; a slow Redis shows here first.",
    ["script"],
    buckets=_REDIS_S,
)

# The web
HTTP_REQUESTS = Counter(
    "signoff_http_requests_total",
    "Requests the web answered, by route pattern, method and status.",
    ["route", "method", "status"],
)
