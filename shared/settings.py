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

from shared.archive.location import check_archive_url
from shared.errors import SettingsError

__all__ = [
    "DoubleTextPolicy",
    "LogFormat",
    "RateLimit",
    "Settings",
    "SmtpSecurity",
    "WorkerPool",
    "load_settings",
    "sentinel_addresses",
    "settings_table",
]

ENV_PREFIX = "SIGNOFF_"
DEFAULT_MAX_HISTORY_SIZE = 10_000
MIN_ADMIN_PASSWORD_CHARS = 8  # the rule every password of shared/store/users.py follows


class DoubleTextPolicy(str, Enum):
    """What a prompt sent while a turn runs does."""

    ENQUEUE = "enqueue"
    REJECT = "reject"
    INTERRUPT = "interrupt"


class WorkerPool(str, Enum):
    """How a worker process runs its legs: greenlets (gevent), or a thread each."""

    GEVENT = "gevent"
    THREADS = "threads"


class RateLimit(BaseModel):
    """Limits of one provider (or provider:model); `burst_s` seconds' worth may go at once."""

    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    burst_s: float = Field(default=1.0, gt=0)


class LogFormat(str, Enum):
    """How every process writes its log lines."""

    TEXT = "text"
    JSON = "json"


class SmtpSecurity(str, Enum):
    """How the SMTP connection is protected."""

    STARTTLS = "starttls"
    TLS = "tls"
    NONE = "none"


DEFAULT_CLUSTER_SHARDS = 12
BROKER_SCHEMES = ("amqp", "amqps", "redis", "rediss", "unix")  # RabbitMQ, or a Redis of its own


class Settings(BaseSettings):
    """Every knob of Signoff. Field docs become the README's configuration table."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    # Redis
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description="Redis for state and events, and Celery's broker unless SIGNOFF_BROKER_URL "
        "names another; `signoff up` runs its own unless set.",
    )
    broker_url: str = Field(
        "",
        description="Celery's broker; empty: the state Redis (SIGNOFF_REDIS_URL). "
        "amqp://user:password@host:5672/vhost puts the task queues on RabbitMQ (quorum queues, "
        "persistent messages, native delayed delivery); a redis:// URL, on a Redis of their own. "
        "A broker apart from the state Redis receives the tasks that state writes ask for "
        "through an outbox in the state Redis, relayed by the workers and `signoff beat`. "
        "Give every process the same: workers, beat, web and CLI.",
    )
    redis_cluster: bool = Field(
        False,
        description="SIGNOFF_REDIS_URL names a node of a Redis Cluster (any one): state is "
        "spread over SIGNOFF_STATE_SHARDS shards, each on one slot. Celery's broker must then "
        "be apart (SIGNOFF_BROKER_URL): its Redis transport cannot use a cluster.",
    )
    state_shards: int = Field(
        0,
        ge=0,
        le=1024,
        description="How many shards a cluster's state is spread over (a conversation and its "
        "shard's copies of the global indexes share a slot). Fixed for a deployment's life: "
        "conversations are found by it. 0: 1 on one Redis, 12 on a cluster (even over 1, 2, "
        "3, 4, 6 or 12 primaries).",
    )
    redis_sentinels: str = Field(
        "",
        description="Sentinels (host:port, comma-separated) that say which Redis is the "
        "primary: set, every process follows a failover; SIGNOFF_REDIS_URL then gives only the "
        "password and database. Empty: SIGNOFF_REDIS_URL is the Redis.",
    )
    redis_sentinel_master: str = Field(
        "signoff", description="The name the Sentinels monitor the primary under."
    )
    redis_sentinel_password: SecretStr = Field(
        SecretStr(""), description="The Sentinels' own password, if they require one."
    )
    redis_wait_replicas: int = Field(
        0,
        ge=0,
        le=16,
        description="Replicas that must have a resolution, a prompt's acceptance and a tool "
        "call's claim before they are answered or acted on (Redis WAIT): with 1, a failover "
        "to an up-to-date replica loses none of them. 0: answered once the primary has them.",
    )
    redis_wait_timeout_ms: int = Field(
        1000,
        gt=0,
        description="How long such a write waits for its replicas; past it, the write fails "
        "with StorageError (it is on the primary, not known to be replicated).",
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
    worker_pool: WorkerPool = Field(
        WorkerPool.GEVENT,
        description="gevent: a leg waiting on a model or a tool holds a greenlet, not a thread; "
        "threads: a thread per running leg (then keep the concurrency to tens).",
    )
    worker_concurrency: int = Field(
        1000,
        gt=0,
        le=10_000,
        description="Legs (turns) in flight per worker process; more wait in the queue.",
    )
    worker_redis_connections: int = Field(
        128,
        ge=1,
        le=1000,
        description="Redis connections per worker process shared by its legs (the delta "
        "ticker's, the broker's and the lease renewer's aside); legs beyond it wait for one, "
        "as long as a lease lives (SIGNOFF_LEASE_TTL_MS) or SIGNOFF_REDIS_POOL_WAIT_S if longer.",
    )
    model_connections: int = Field(
        1000,
        ge=1,
        le=10_000,
        description="HTTP connections per model provider per worker process; model calls "
        "beyond it wait for one (up to SIGNOFF_PROVIDER_TIMEOUT_S).",
    )
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
    archive_dir: str = Field(
        ".signoff/archive",
        description="Where finished conversations past their retention are archived "
        "(compressed JSONL, one file each; relative to the working directory). The scheduler "
        "writes it and the web reads it: share it between them.",
    )
    archive_url: str = Field(
        "",
        description="s3://<bucket>[/<prefix>]: archive to an S3-compatible bucket instead of "
        "SIGNOFF_ARCHIVE_DIR (credentials by boto3's chain: AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY, a profile or a role); empty: the directory.",
    )
    archive_s3_endpoint_url: str = Field(
        "",
        description="The S3 API's URL for another S3-compatible store (MinIO, Ceph...); "
        "empty: AWS's.",
    )
    archive_s3_region: str = Field(
        "", description="The archive bucket's region; empty: boto3's default."
    )
    archive_interval_s: float = Field(
        300.0, gt=0, description="How often the scheduler archives conversations past retention."
    )
    audit_retention_days: float = Field(
        0.0,
        ge=0,
        description="Days the audit log keeps a resolution; 0: keep every one (its own "
        "retention, apart from the conversations').",
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
        0,
        ge=0,
        description="Also compact past this many prompt tokens, below the context's threshold; "
        "0: only at SIGNOFF_COMPACTION_THRESHOLD.",
    )
    context_tokens: int = Field(
        32_768,
        gt=0,
        description="The context window (tokens) of a model that SIGNOFF_CONTEXT_SIZES and its "
        "agent do not size.",
    )
    context_sizes: dict[str, Annotated[int, Field(gt=0)]] = Field(
        default_factory=dict,
        description='Context windows per provider or provider:model, e.g. {"openai": 128000, '
        '"ollama:qwen3": 4096}; an agent\'s context_tokens wins.',
    )
    compaction_threshold: float = Field(
        0.75,
        gt=0,
        le=1,
        description="Compact when a prompt would reach this fraction of the model's context "
        "window (its size as the provider counts it, from the last call's reported tokens).",
    )

    max_output_tokens: int = Field(
        4096,
        ge=0,
        le=10_000_000,
        description="Default cap on the tokens of one model answer; 0 leaves the model's own.",
    )
    temperature: float = Field(
        -1.0,
        ge=-1,
        le=2,
        description="Default sampling temperature (0-2); -1 leaves the model's own.",
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
    provider_max_retries: int = Field(
        3,
        ge=0,
        description="Retries on 5xx and lost connections, with backoff (a 429 instead pauses "
        "the provider for every worker and the turn calls again).",
    )
    rate_limits: dict[str, RateLimit] = Field(
        default_factory=dict,
        description='Per provider or provider:model, e.g. {"openai": {"requests_per_minute": 500, '
        '"tokens_per_minute": 200000}}; shared by every worker, whose waiting calls are served '
        "interactive first, then scheduled and triggered, then batches taking turns.",
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

    # MCP tool servers
    mcp_call_timeout_s: float = Field(
        30.0, gt=0, le=3_600, description="Timeout of one MCP tool call (a tool error after it)."
    )
    mcp_connect_timeout_s: float = Field(
        15.0, gt=0, le=600, description="Timeout of starting or reaching an MCP server."
    )
    mcp_max_result_bytes: int = Field(
        1_000_000,
        ge=1_000,
        le=100_000_000,
        description="An MCP tool result larger than this (as JSON) is refused with a tool error.",
    )
    mcp_max_tools: int = Field(
        256, ge=1, le=10_000, description="Tools offered per MCP server (the rest are refused)."
    )
    mcp_max_concurrency: int = Field(
        4, ge=1, le=256, description="MCP calls in flight per server per worker process."
    )
    outbound_allow: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Hosts or networks, comma-separated (`127.0.0.1,10.0.0.0/8,hooks.lan`), that "
        "webhook deliveries may reach although they are loopback, private, link-local or "
        "metadata addresses (refused otherwise, checked at each connection).",
    )
    mcp_allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Hosts or networks, comma-separated (`127.0.0.1,10.0.0.0/8`), an MCP server "
        "URL may "
        "reach although they are loopback, private, link-local or metadata addresses.",
    )
    mcp_elicit_wait_s: float = Field(
        60.0,
        gt=0,
        le=3_600,
        description="How long a live MCP call that asks for input waits for a person's answer "
        "before the server gets a decline.",
    )

    # Approvals
    approval_timeout_s: int = Field(86_400, gt=0, description="Default time an approval may wait.")
    smtp_host: str = Field(
        "", description="SMTP server routes send approval emails through; empty: no email."
    )
    smtp_port: int = Field(587, gt=0, lt=65_536, description="Port of the SMTP server.")
    smtp_security: SmtpSecurity = Field(
        SmtpSecurity.STARTTLS,
        description="starttls (upgrade, certificate checked), tls (TLS from the start) or none.",
    )
    smtp_username: str = Field("", description="SMTP login; empty: none.")
    smtp_password: SecretStr = Field(SecretStr(""), description="SMTP password.")
    smtp_from: str = Field("signoff@localhost", description="The From address of approval emails.")
    smtp_timeout_s: float = Field(10.0, gt=0, le=120, description="Timeout of one SMTP session.")
    slack_bot_token: SecretStr = Field(
        SecretStr(""), description="The Slack app's bot token (xoxb-...); empty: no Slack."
    )
    slack_signing_secret: SecretStr = Field(
        SecretStr(""),
        description="The Slack app's signing secret: interactions are checked with it.",
    )
    slack_api_url: str = Field(
        "https://slack.com/api", description="Slack's Web API (a stand-in's in tests)."
    )
    approval_link_ttl_s: int = Field(
        86_400,
        gt=0,
        le=7 * 86_400,
        description="How long the signed link in an approval email stays usable.",
    )

    # Webhooks and triggers
    public_url: str = Field(
        "",
        description="The web UI's address as people reach it (https://signoff.example.com): "
        "webhook payloads link to approval pages under it; empty: http://WEB_HOST:WEB_PORT.",
    )
    webhook_timeout_s: float = Field(
        10.0, gt=0, le=60, description="Timeout of one webhook delivery (connect and read)."
    )
    webhook_concurrency: int = Field(
        4,
        gt=0,
        le=256,
        description="Threads of the delivery worker that `signoff worker` runs beside the turn "
        "worker (deliveries never take a turn's thread).",
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

    # Observability
    log_format: LogFormat = Field(
        LogFormat.TEXT,
        description="text, or json: one JSON object a line (time, level, logger, message, and "
        "the conversation and turn where there is one), in every process.",
    )
    otel_endpoint: str = Field(
        "",
        description="An OTLP/HTTP endpoint (http://collector:4318) traces are sent to; empty: "
        "OTEL_EXPORTER_OTLP_ENDPOINT if set, else no tracing.",
    )
    otel_sample_ratio: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="The share of turns traced (and of web requests and tasks that start a "
        "trace): 1 traces all; 0.1 one in ten, for a busy fleet. A turn's choice is kept "
        "across its park and resume, so a trace is whole or absent.",
    )
    otel_capture_content: bool = Field(
        False,
        description="Put prompts, answers, tool arguments and results on spans (they may hold "
        "personal data); off: spans carry names, ids, timings and token counts only.",
    )
    metrics_token: SecretStr = Field(
        SecretStr(""),
        description="A bearer token that may read the web's /metrics (operators may too); "
        "empty: operators only.",
    )
    metrics_port: int = Field(
        0,
        ge=0,
        lt=65_536,
        description="Port `signoff worker` serves Prometheus metrics on (/metrics); 0: off.",
    )
    beat_metrics_port: int = Field(
        0,
        ge=0,
        lt=65_536,
        description="Port `signoff beat` serves Prometheus metrics on (/metrics); 0: off.",
    )
    metrics_host: str = Field(
        "127.0.0.1", description="Address the worker's and beat's metrics ports bind."
    )
    metrics_dir: str = Field(
        "",
        description="Where each run of the web, worker and beat keeps its processes' metric "
        "files (a directory per run, removed when it stops); empty: signoff-metrics-<uid> in "
        "the temporary directory (`signoff up`: .signoff/metrics).",
    )

    @field_validator("key_prefix")
    @classmethod
    def _prefix_is_plain(cls, value: str) -> str:
        if not value or any(ch in value for ch in "{}: \n"):
            raise ValueError("must be non-empty without braces, colons or whitespace")
        return value

    @field_validator("redis_wait_replicas")
    @classmethod
    def _wait_on_one_primary(cls, value: int, info: ValidationInfo) -> int:
        if value and info.data.get("redis_cluster"):
            raise ValueError(
                "waiting for replicas is not supported on a Redis Cluster (a WAIT answers for "
                "one node's replicas): set SIGNOFF_REDIS_WAIT_REPLICAS=0"
            )
        return value

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinel_addresses(cls, value: str, info: ValidationInfo) -> str:
        sentinel_addresses(value)  # raises ValueError naming a malformed one
        if value and info.data.get("redis_cluster"):
            raise ValueError("a Redis Cluster fails over by itself: unset SIGNOFF_REDIS_SENTINELS")
        return value

    @field_validator("archive_url")
    @classmethod
    def _archive_bucket(cls, value: str) -> str:
        if value:
            check_archive_url(value)  # raises ValueError naming the fault
        return value

    @field_validator("archive_s3_endpoint_url")
    @classmethod
    def _archive_endpoint(cls, value: str) -> str:
        if value and value.partition("://")[0].lower() not in ("http", "https"):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @property
    def shards(self) -> int:
        """The state shards in effect (`state_shards`, or its default)."""
        return self.state_shards or (DEFAULT_CLUSTER_SHARDS if self.redis_cluster else 1)

    @field_validator("redis_cluster")
    @classmethod
    def _cluster_broker_apart(cls, value: bool, info: ValidationInfo) -> bool:
        if value and not info.data.get("broker_url"):
            raise ValueError(
                "a Redis Cluster cannot be Celery's broker: set SIGNOFF_BROKER_URL to RabbitMQ "
                "(amqp://...) or to a Redis of its own"
            )
        return value

    @field_validator("broker_url")
    @classmethod
    def _known_broker(cls, value: str) -> str:
        scheme = value.partition("://")[0].lower() if "://" in value else ""
        if value and scheme not in BROKER_SCHEMES:
            raise ValueError(
                f"must be empty (the state Redis) or a URL of {', '.join(BROKER_SCHEMES)}"
            )
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

    @field_validator("mcp_allowed_hosts", "outbound_allow", mode="before")
    @classmethod
    def _host_list(cls, value: object) -> object:
        return _list(value, separator=",", example="a,b")

    @field_validator("workspace_roots", mode="before")
    @classmethod
    def _path_list(cls, value: object) -> object:
        return _list(value, separator=os.pathsep, example="a:b")

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


def _list(value: object, *, separator: str, example: str) -> object:
    """A list variable: a JSON array, or items joined by `separator`."""
    if not isinstance(value, str):
        return value
    if value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON array ({exc}); or give them as {example}") from None
    return tuple(part.strip() for part in value.split(separator) if part.strip())


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


def sentinel_addresses(value: str) -> list[tuple[str, int]]:
    """`host:port, host:port` as pairs; a malformed entry raises ValueError naming it."""
    found = []
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        host, _, port = entry.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65_536:
            raise ValueError(f"{entry!r} is not host:port")
        found.append((host.strip("[]"), int(port)))
    return found
