"""One typed settings object, read from ``SIGNOFF_*`` variables once and passed in.

Units are in the names. An invalid value fails at start-up with a message that
names the variable, through `load_settings`.
"""

from __future__ import annotations

import json
import os
import re
from enum import Enum
from pathlib import Path
from typing import Annotated

import pydantic_settings
from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared.errors import SettingsError

__all__ = ["DoubleTextPolicy", "RateLimit", "Settings", "load_settings", "settings_table"]

ENV_PREFIX = "SIGNOFF_"
DEFAULT_MAX_HISTORY_SIZE = 10_000
MIN_ADMIN_PASSWORD_CHARS = 8  # the rule every password of shared/store/users.py follows


class DoubleTextPolicy(str, Enum):
    """What a prompt sent while a turn runs does."""

    ENQUEUE = "enqueue"
    REJECT = "reject"
    INTERRUPT = "interrupt"


class RateLimit(BaseModel):
    """Limits of one provider (or provider:model); `burst_s` seconds' worth may go at once."""

    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    burst_s: float = Field(default=1.0, gt=0)


class Settings(BaseSettings):
    """Every knob of Signoff. Field docs become the README's configuration table."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    # Redis
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description="Redis for state, events and the broker; `signoff up` runs its own unless set.",
    )
    key_prefix: str = Field("signoff", description="Prefix of every Redis key Signoff writes.")
    redis_timeout_s: float = Field(5.0, gt=0, description="Socket timeout for Redis commands.")
    redis_pool_wait_s: float = Field(
        5.0,
        gt=0,
        description="How long a thread (or task) waits for a free pooled connection (client, "
        "web, task sending) before StorageError naming the pool; the web answers 503 with "
        "Retry-After.",
    )
    client_redis_connections: int = Field(
        32,
        ge=1,
        le=1000,
        description="Redis connections per `Client` or `AsyncClient`, shared by its threads or "
        "tasks: those beyond it wait for one (a thread following a stream holds one up to a "
        "second at a time).",
    )
    broker_connections: int = Field(
        10,
        ge=1,
        le=1000,
        description="Broker connections per process for sending tasks (Celery's "
        "`broker_pool_limit`); senders beyond it wait for one.",
    )
    redis_retry_s: float = Field(
        60.0,
        ge=0,
        description="How long `signoff batch` waits for an unreachable Redis, retrying and "
        "saying so on stderr, before it exits with an error; 0: no retrying.",
    )

    # History and prompts
    max_history_size: int = Field(
        DEFAULT_MAX_HISTORY_SIZE,
        ge=0,
        description="Steps retained per conversation; 0 means unlimited.",
    )
    max_prompt_text_bytes: int = Field(
        1_000_000, gt=0, description="Text bytes allowed in one prompt."
    )
    max_prompt_media_bytes: int = Field(
        20_000_000, gt=0, description="Media bytes allowed in one prompt."
    )
    allowed_media_types: frozenset[str] = Field(
        frozenset(
            {"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf", "text/plain"}
        ),
        description="Media types a prompt may attach.",
    )

    # Events and streaming
    stream_maxlen: int = Field(
        10_000, gt=0, description="Approximate length cap of each event stream."
    )
    events_ttl_s: int = Field(
        7 * 86_400, gt=0, description="Event streams expire this long after their last write."
    )
    flush_interval_ms: int = Field(
        20, ge=0, description="Window over which deltas are coalesced into one write."
    )

    # Worker and turns
    worker_concurrency: int = Field(8, gt=0, description="Threads per worker process.")
    visibility_timeout_s: int = Field(
        900,
        gt=0,
        description="Celery redelivers a task unacknowledged this long (a killed worker's); "
        "at least twice the leg time slice. A redelivered leg finds its work done or leased.",
    )
    lease_ttl_ms: int = Field(
        30_000, gt=0, description="A conversation's lease; renewed while a leg runs."
    )
    sweep_interval_s: float = Field(
        15.0, gt=0, description="How often the scheduler sweeps for stalled work."
    )
    schedule_poll_s: float = Field(
        1.0,
        gt=0,
        le=60,
        description="Longest wait of `signoff beat` between looks for new schedules; "
        "a known next fire is waited for exactly.",
    )
    schedule_misfire_s: float = Field(
        60.0,
        gt=0,
        description="A schedule's fire handled later than this after its due time was missed "
        "(beat was down): it runs once or is skipped, by the schedule's `missed` policy.",
    )
    schedule_claim_lease_s: float = Field(
        30.0,
        gt=0,
        le=3_600,
        description="A slot claimed by a beat and not fired this long after (the beat died) is "
        "taken over by another beat, which fires it once (or skips it, if it was missed).",
    )
    leg_time_slice_s: float = Field(
        300.0, gt=0, description="A leg yields its worker after this long."
    )
    turn_timeout_s: float = Field(
        600.0, gt=0, description="Default per-turn timeout, parked time excluded."
    )
    max_model_calls: int = Field(16, gt=0, description="Default cap on model calls per turn.")
    max_tool_calls: int = Field(32, gt=0, description="Default cap on tool calls per turn.")
    double_text_policy: DoubleTextPolicy = Field(
        DoubleTextPolicy.ENQUEUE, description="Default for a prompt sent while a turn runs."
    )
    compaction_token_budget: int = Field(
        0, ge=0, description="Compact automatically past this many context tokens; 0 disables."
    )

    # Providers
    provider: str = Field("scripted", description="Default provider: scripted, openai or ollama.")
    model: str = Field("signoff-demo", description="Default model name (the scripted demo model).")
    scripted_token_delay_ms: int = Field(
        0, ge=0, description="Delay per token of the scripted demo model."
    )
    openai_base_url: str = Field(
        "https://api.openai.com/v1", description="Base URL of an OpenAI-compatible API."
    )
    openai_api_key: SecretStr = Field(SecretStr(""), description="API key for the openai provider.")
    ollama_base_url: str = Field(
        "http://127.0.0.1:11434", description="Base URL of an Ollama server."
    )
    provider_timeout_s: float = Field(120.0, gt=0, description="HTTP timeout of one model call.")
    provider_max_retries: int = Field(3, ge=0, description="Retries on 429 and 5xx, with backoff.")
    rate_limits: dict[str, RateLimit] = Field(
        default_factory=dict,
        description='Per provider or provider:model, e.g. {"openai": {"requests_per_minute": 500, '
        '"tokens_per_minute": 200000}}; shared by every worker.',
    )

    # Tools
    workspace_roots: Annotated[tuple[Path, ...], NoDecode] = Field(
        (),
        description="Directories file tools may read (and write): `a:b` or a JSON array.",
    )
    workspace_writable: bool = Field(
        False, description="Whether file tools may write under the roots."
    )
    tools_module: str = Field("", description="Module path whose TOOLS list adds user tools.")

    # Approvals
    approval_timeout_s: int = Field(86_400, gt=0, description="Default time an approval may wait.")

    # Webhooks and triggers
    public_url: str = Field(
        "",
        description="The web UI's address as people reach it (https://signoff.example.com): "
        "webhook payloads link to approval pages under it; empty: http://WEB_HOST:WEB_PORT.",
    )
    webhook_timeout_s: float = Field(
        10.0, gt=0, le=60, description="Timeout of one webhook delivery (connect and read)."
    )
    webhook_max_attempts: int = Field(
        6, ge=1, le=20, description="Attempts of one delivery before it is marked failed."
    )
    webhook_backoff_s: float = Field(
        5.0, gt=0, description="Wait before a delivery's second attempt; doubles each time."
    )
    webhook_backoff_max_s: float = Field(
        300.0, gt=0, le=600, description="The longest wait between two attempts of a delivery."
    )
    webhook_retry_grace_s: float = Field(
        60.0,
        gt=0,
        le=3_600,
        description="A pending delivery whose next attempt is overdue by this much (its task "
        "was lost with a killed worker) is sent again by a worker's webhook dispatcher.",
    )
    webhook_log_size: int = Field(
        1_000, ge=10, le=100_000, description="Deliveries kept in the log (the oldest go first)."
    )
    trigger_tolerance_s: int = Field(
        300,
        ge=1,
        le=3_600,
        description="How far a trigger request's webhook-timestamp may be from now; older or "
        "newer is refused as a replay.",
    )

    # Web
    web_host: str = Field("127.0.0.1", description="Address `signoff web` binds.")
    web_port: int = Field(8000, gt=0, lt=65_536, description="Port `signoff web` binds.")
    secret_key: SecretStr = Field(
        SecretStr(""), description="Signs sessions and CSRF tokens; set in production."
    )
    admin_user: str = Field(
        "admin", description="Operator account created at start when a password is set."
    )
    admin_password: SecretStr = Field(
        SecretStr(""), description="Password of `admin_user`; empty: none."
    )
    cookie_secure: bool = Field(
        False, description="Send cookies over HTTPS only; on in production."
    )
    login_attempts_per_minute: int = Field(
        10, gt=0, description="Sign-in attempts per IP per minute."
    )
    login_attempts_per_user_per_minute: int = Field(
        20, gt=0, description="Sign-in attempts per username per minute, from any address."
    )
    sse_heartbeat_s: float = Field(
        15.0, gt=0, description="Comment sent to idle SSE clients this often."
    )
    sse_max_lifetime_s: float = Field(
        3600.0,
        gt=0,
        description="An SSE stream is ended after this long with a closing comment; "
        "EventSource reconnects with Last-Event-ID and misses nothing.",
    )
    web_workers: int = Field(2, gt=0, description="gunicorn worker processes of `signoff web`.")
    web_connections: int = Field(
        4000,
        ge=10,
        le=100_000,
        description="Connections one web worker process serves at once (event streams, kept-alive "
        "and slow clients included): each is a greenlet, not a thread; beyond it, new connections "
        "wait in the listen backlog.",
    )
    web_header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="Time a client has to send a request's line and headers, from its connection "
        "(or, on a kept-alive one, from the request's first byte); then it is disconnected.",
    )
    web_body_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Time a client has to send a request's body, from the end of its headers; "
        "then it is disconnected.",
    )
    web_send_timeout_s: float = Field(
        30.0,
        gt=0,
        description="A client that takes none of a response's bytes (an event stream's included) "
        "for this long is disconnected.",
    )
    web_shutdown_timeout_s: int = Field(
        3,
        ge=1,
        le=60,
        description="On SIGTERM event streams end at once with a closing comment; requests in "
        "flight get this long to finish before their worker is killed.",
    )
    web_redis_connections: int = Field(
        3,
        ge=2,
        le=1000,
        description="Redis connections per web worker process (one is the live feed's); a "
        "request holds one for a round trip at a time, waits up to SIGNOFF_REDIS_POOL_WAIT_S for "
        "one, then gets 503 with Retry-After.",
    )

    @field_validator("key_prefix")
    @classmethod
    def _prefix_is_plain(cls, value: str) -> str:
        if not value or any(ch in value for ch in "{}: \n"):
            raise ValueError("must be non-empty without braces, colons or whitespace")
        return value

    @field_validator("leg_time_slice_s")
    @classmethod
    def _slice_within_visibility(cls, value: float, info: ValidationInfo) -> float:
        visibility_s = info.data.get("visibility_timeout_s")
        if visibility_s is not None and value * 2 > visibility_s:
            raise ValueError(
                f"must be at most half of SIGNOFF_VISIBILITY_TIMEOUT_S ({visibility_s} s), so "
                "that Celery redelivers a task only once its leg has surely ended"
            )
        return value

    @field_validator("workspace_roots", mode="before")
    @classmethod
    def _path_list(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        if value.lstrip().startswith("["):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON array ({exc}); or give paths as a:b") from None
        return tuple(part for part in value.split(os.pathsep) if part.strip())

    @field_validator("admin_password")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        if 0 < len(value.get_secret_value()) < MIN_ADMIN_PASSWORD_CHARS:
            raise ValueError(
                f"must be at least {MIN_ADMIN_PASSWORD_CHARS} characters (or empty: no admin)"
            )
        return value

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in {"scripted", "openai", "ollama"}:
            raise ValueError("must be one of scripted, openai, ollama")
        return value


def load_settings(**overrides: object) -> Settings:
    """Reads the environment; an invalid value raises SettingsError naming the variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = "; ".join(_problem(err["loc"], err["msg"]) for err in exc.errors())
        raise SettingsError(f"invalid settings: {problems}") from exc
    except pydantic_settings.SettingsError as exc:  # a value that must be JSON is not
        field = re.search(r'field "(\w+)"', str(exc))
        name = f"{ENV_PREFIX}{field[1].upper()}" if field else f"a {ENV_PREFIX} variable"
        raise SettingsError(f"invalid settings: {name}: must be JSON ({exc.__cause__})") from exc


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    """`SIGNOFF_RATE_LIMITS (openai.burst_s): ...`: the variable, then the place inside it."""
    variable = f"{ENV_PREFIX}{str(loc[0]).upper()}" if loc else f"a {ENV_PREFIX} variable"
    inside = f" ({'.'.join(str(part) for part in loc[1:])})" if len(loc) > 1 else ""
    return f"{variable}{inside}: {message.removeprefix('Value error, ')}"


def settings_table() -> str:
    """The README's configuration table, generated from the fields above."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = field.default
        if isinstance(default, SecretStr):
            default = "(empty)" if not default.get_secret_value() else "(set)"
        elif isinstance(default, Enum):
            default = default.value
        elif isinstance(default, frozenset):
            default = ", ".join(sorted(default))
        elif default == () or field.default_factory is not None:
            default = "(none)"
        rows.append(f"| `{ENV_PREFIX}{name.upper()}` | `{default}` | {field.description or ''} |")
    return "\n".join(rows)
