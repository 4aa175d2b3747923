"""`signoff doctor`: checks that Redis, the workers and the scheduler are set up to keep state.

Each check gives one line, ok / warn / FAIL, and says why it matters. Any FAIL makes
the exit status 1. A failing Redis command is reported as a check result, never raised.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

import click
import redis
from kombu.exceptions import KombuError

from shared.archive.archiver import Archiver
from shared.archive.storage import ArchiveUnavailable, storage_for
from shared.client.broker import BrokerKind, broker_kind, described, redacted_url
from shared.client.tasks import TaskSender
from shared.errors import SettingsError, SignoffError
from shared.settings import Settings, load_settings
from shared.store.connection import connect
from shared.store.keys import KeySpace
from shared.store.sharded import zset_count, zset_page, zset_total
from shared.store.task_outbox import TaskOutbox

__all__ = ["Check", "Level", "doctor", "run_checks"]

MIN_REDIS_VERSION = (7, 0)
PING_TIMEOUT_S = 1.0
MIN_STALE_HEARTBEAT_S = 30.0
OUTBOX_BACKLOG = 1_000  # more tasks than this waiting to be relayed: is a relay running?


class Level(str, Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Check:
    """The outcome of one check: what was checked, how it went, and why it matters."""

    name: str
    level: Level
    message: str


redacted = redacted_url  # the Redis URL with its password hidden


def _cluster_info(by_node: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A cluster's primaries' INFO as one: memory summed, the oldest version, and the weakest
    setting of any (an evicting or unpersisted node is the cluster's risk)."""
    nodes = list(by_node.values())
    merged = dict(nodes[0])
    merged["cluster_primaries"] = len(nodes)
    for field in ("used_memory", "maxmemory", "total_system_memory"):
        merged[field] = sum(int(node.get(field, 0)) for node in nodes)
    merged["redis_version"] = min(
        (str(node.get("redis_version", "?")) for node in nodes), key=_version
    )
    evicting = [
        n.get("maxmemory_policy") for n in nodes if n.get("maxmemory_policy") != "noeviction"
    ]
    if evicting:
        merged["maxmemory_policy"] = evicting[0]
    merged["aof_enabled"] = min(int(node.get("aof_enabled", 0)) for node in nodes)
    return merged


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())


# Checks


def check_redis(client: redis.Redis, settings: Settings) -> tuple[Check, dict[str, Any]]:
    """Reachable, and version 7 or later; returns INFO for the checks that read it."""
    where = redacted(settings.redis_url)
    try:
        if settings.redis_sentinels:
            host, port = client.connection_pool.get_master_address()  # type: ignore[attr-defined]
            where = (
                f"{host}:{port}, the primary of {settings.redis_sentinel_master!r} "
                f"(Sentinels {settings.redis_sentinels})"
            )
        if settings.redis_cluster:
            info = _cluster_info(client.info(target_nodes="primaries"))
            where = f"{where}, a Redis Cluster of {info['cluster_primaries']} primaries"
        else:
            info = client.info()
    except redis.AuthenticationError as exc:
        return Check("redis", Level.FAIL, f"{where} refused the password: {exc}"), {}
    except redis.RedisError as exc:
        return Check("redis", Level.FAIL, f"cannot reach {where}: {exc}"), {}
    version = str(info.get("redis_version", "?"))
    if _version(version) < MIN_REDIS_VERSION:
        message = f"reachable at {where}, but version {version} is older than 7 (Redis 7 is tested)"
        return Check("redis", Level.WARN, message), info
    return Check("redis", Level.OK, f"reachable at {where}, version {version}"), info


def check_eviction(client: redis.Redis, info: dict[str, Any]) -> Check:
    """noeviction: a full Redis must refuse writes, never drop state."""
    policy = info.get("maxmemory_policy") or _config_get(client, "maxmemory-policy")
    if policy is None:
        return Check(
            "maxmemory-policy", Level.WARN, "could not be read; make sure it is noeviction"
        )
    if policy != "noeviction":
        return Check(
            "maxmemory-policy",
            Level.FAIL,
            f"is {policy}: under memory pressure Redis would evict keys and lose conversation "
            "state, approvals and queued tasks; set maxmemory-policy noeviction",
        )
    return Check("maxmemory-policy", Level.OK, "noeviction (a full Redis refuses writes)")


def check_aof(client: redis.Redis, info: dict[str, Any]) -> Check:
    """AOF on, and how often it reaches the disk: what a Redis restart or a host crash loses."""
    if str(info.get("aof_enabled", "0")) != "1":
        return Check(
            "aof",
            Level.WARN,
            "appendonly is off: a Redis restart loses what was written since the last snapshot; "
            "set appendonly yes in production",
        )
    fsync = _config_get(client, "appendfsync")
    if fsync == "always":
        return Check(
            "aof", Level.OK, "appendonly yes, appendfsync always (on disk before Redis answers)"
        )
    lost = _FSYNC_LOSS.get(fsync or "", "what was not yet on disk (appendfsync could not be read)")
    return Check(
        "aof",
        Level.WARN,
        f"appendonly yes, appendfsync {fsync or 'unknown'}: a host crash (power loss, kernel "
        f"panic; a Redis restart is safe) loses {lost}, so completed turns run again, tools may "
        "run twice and resolved approvals reopen; appendfsync always prevents it "
        "(README, Production notes)",
    )


# What a host crash loses under each appendfsync policy short of `always`.
_FSYNC_LOSS = {
    "everysec": "the last second of writes",
    "no": "the writes the OS had not flushed yet (typically up to 30 s)",
}


MEMORY_SAMPLE = 20  # the newest conversations whose keys `check_memory` measures
DAY_S = 86_400.0


def check_memory(client: redis.Redis, settings: Settings, info: dict[str, Any]) -> Check:
    """Memory per conversation (the newest ones measured) and, at the last day's rate of new
    conversations less archived ones, when Redis fills."""
    archiver = Archiver(client, KeySpace.of(settings), settings)
    keys, now = archiver.keys, time.time()
    indexes, archives = keys.every_shard(keys.conversations), keys.every_shard(keys.archived)
    try:
        total = zset_total(client, indexes)
        newest = [cid for cid, _ in zset_page(client, indexes, 0, MEMORY_SAMPLE)]
        sizes = [_conversation_bytes(client, archiver.key_names(cid)) for cid in newest]
        created = zset_count(client, indexes, now - DAY_S, now)
        archived = zset_count(client, archives, now - DAY_S, now)
    except (redis.RedisError, SignoffError) as exc:
        return Check("memory", Level.WARN, f"could not be measured: {exc}")
    used = int(info.get("used_memory", 0))
    limit = int(info.get("maxmemory", 0)) or int(info.get("total_system_memory", 0))
    limit_name = "maxmemory" if int(info.get("maxmemory", 0)) else "the host's memory"
    if not sizes:
        return Check(
            "memory",
            Level.OK,
            f"{_mb(used)} used of {_mb(limit)} ({limit_name}); no conversations yet",
        )
    each = sum(sizes) / len(sizes)
    growth = (created - archived) * each
    head = (
        f"{total} conversations, {each / 1024:.1f} KB each (the newest {len(sizes)}); "
        f"{_mb(used)} used of {_mb(limit)} ({limit_name}); last day: +{created} new, "
        f"-{archived} archived"
    )
    if growth <= 0 or not limit:
        return Check("memory", Level.OK, f"{head}; not growing")
    days = max(limit - used, 0) / growth
    level = Level.WARN if days < 7 else Level.OK
    advice = "; set a retention (signoff archive retention set)" if level is Level.WARN else ""
    return Check("memory", level, f"{head}; full in about {days:.1f} days at this rate{advice}")


def _conversation_bytes(client: redis.Redis, names: list[str]) -> int:
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.memory_usage(name)
        return sum(int(size or 0) for size in pipe.execute())


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def check_password(client: redis.Redis, settings: Settings) -> Check:
    """A password in the URL; otherwise Redis just accepted us without one."""
    if redis.connection.parse_url(settings.redis_url).get("password"):
        return Check("password", Level.OK, "set (SIGNOFF_REDIS_URL carries one)")
    requirepass = _config_get(client, "requirepass")
    if requirepass:  # an ACL user without a password may still be allowed in
        return Check("password", Level.OK, "requirepass is set on the server")
    return Check(
        "password",
        Level.WARN,
        "none: anyone who can reach this Redis can read and change every conversation; "
        "set requirepass (or an ACL user) and put it in SIGNOFF_REDIS_URL",
    )


def check_broker(client: redis.Redis, settings: Settings) -> Check:
    """Which broker Celery uses; a broker apart must answer, and its outbox must drain."""
    if broker_kind(settings) is BrokerKind.STATE_REDIS:
        return Check("broker", Level.OK, described(settings))
    sender = TaskSender(settings)
    try:
        with sender.app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, timeout=PING_TIMEOUT_S)
    except (KombuError, OSError) as exc:
        return Check("broker", Level.FAIL, f"{described(settings)}: cannot reach it: {exc}")
    finally:
        sender.close()
    try:
        keys = KeySpace.of(settings)
        waiting = sum(
            TaskOutbox(client, keys, shard, lease_ms=0).waiting() for shard in keys.all_shards()
        )
    except SignoffError as exc:
        return Check("broker", Level.WARN, f"{described(settings)}; outbox unread: {exc}")
    if waiting > OUTBOX_BACKLOG:
        message = (
            f"{described(settings)}; {waiting} tasks wait in the outbox: is a worker or "
            "`signoff beat` running to relay them?"
        )
        return Check("broker", Level.WARN, message)
    return Check("broker", Level.OK, f"{described(settings)}; {waiting} in the outbox")


def check_workers(settings: Settings) -> Check:
    """Celery remote-control ping through the broker."""
    sender = TaskSender(settings)
    try:
        replies = sender.app.control.ping(timeout=PING_TIMEOUT_S) or []
    except (KombuError, redis.RedisError, OSError) as exc:
        return Check("workers", Level.FAIL, f"could not ping workers: {exc}")
    finally:
        sender.close()
    names = sorted(name for reply in replies for name in reply)
    if not names:
        return Check(
            "workers",
            Level.WARN,
            f"no worker answered within {PING_TIMEOUT_S:g}s through {described(settings)}: "
            "prompts wait in the queue until one runs (`signoff worker`), or for ever if "
            "the workers were given another broker (SIGNOFF_BROKER_URL must be the same for "
            "workers, web and CLI)",
        )
    return Check("workers", Level.OK, f"{len(names)} answered: {', '.join(names)}")


def check_scheduler(client: redis.Redis, settings: Settings) -> Check:
    """A recent heartbeat from the sweep that `signoff beat` schedules (the key expires)."""
    key = KeySpace.of(settings).heartbeat("beat")
    try:
        raw = client.get(key)
    except redis.RedisError as exc:
        return Check("scheduler", Level.WARN, f"unknown (reading {key} failed: {exc})")
    if raw is None:
        return Check(
            "scheduler",
            Level.WARN,
            f"unknown (no heartbeat at {key}): is `signoff beat` running, with a worker?",
        )
    try:
        age = time.time() - float(raw)
    except ValueError:
        return Check("scheduler", Level.WARN, f"unknown ({key} holds {raw!r}, not a time)")
    stale_after = max(3 * settings.sweep_interval_s, MIN_STALE_HEARTBEAT_S)
    if age > stale_after:
        return Check(
            "scheduler",
            Level.WARN,
            f"last heartbeat {age:.0f}s ago: is `signoff beat` running? Without it approvals "
            "never expire and stalled turns are not resumed",
        )
    return Check("scheduler", Level.OK, f"heartbeat {max(age, 0):.0f}s ago")


def check_metrics(settings: Settings) -> Check:
    """Where Prometheus finds metrics; a worker or beat port that is set must answer."""
    web = "web /metrics (operators" + (
        ", and the SIGNOFF_METRICS_TOKEN bearer)"
        if settings.metrics_token.get_secret_value()
        else ")"
    )
    parts, silent = [web], []
    for role, port, variable in (
        ("worker", settings.metrics_port, "SIGNOFF_METRICS_PORT"),
        ("beat", settings.beat_metrics_port, "SIGNOFF_BEAT_METRICS_PORT"),
    ):
        if not port:
            parts.append(f"{role} off ({variable} unset)")
            continue
        url = f"http://{_local(settings.metrics_host)}:{port}/metrics"
        parts.append(f"{role} {url}")
        if not _answers(url):
            silent.append(f"{role} at {url}")
    if silent:
        message = (
            f"{'; '.join(parts)}; nothing answers for {', '.join(silent)}: is it running here?"
        )
        return Check("metrics", Level.WARN, message)
    return Check("metrics", Level.OK, "; ".join(parts))


def check_archive(settings: Settings) -> Check:
    """Whether the archive (a directory or a bucket) can be reached."""
    storage = storage_for(settings)
    try:
        where = storage.probe()
    except ArchiveUnavailable as exc:
        return Check("archive", Level.FAIL, f"{exc}: conversations past retention stay in Redis")
    return Check("archive", Level.OK, where)


def check_tracing(settings: Settings) -> Check:
    """Whether this configuration sends traces, and where."""
    endpoint = settings.otel_endpoint or next(
        (os.environ[name] for name in _OTLP_VARIABLES if os.environ.get(name)), ""
    )
    if not endpoint:
        return Check(
            "tracing",
            Level.OK,
            "off (set SIGNOFF_OTEL_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT to send traces)",
        )
    contents = "with" if settings.otel_capture_content else "without"
    return Check("tracing", Level.OK, f"on: OTLP/HTTP to {endpoint}, {contents} contents")


_OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def _local(host: str) -> str:
    """The address to reach a port bound on `host` from this machine."""
    return "127.0.0.1" if host in ("", "0.0.0.0") else f"[{host}]" if ":" in host else host  # noqa: S104


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=PING_TIMEOUT_S) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False


def _config_get(client: redis.Redis, name: str) -> str | None:
    """CONFIG GET, which managed Redis services often refuse: None then."""
    try:
        reply: Any = client.config_get(name)
    except redis.RedisError:
        return None
    value = reply.get(name) if isinstance(reply, dict) else None
    return str(value) if value is not None else None


def run_checks(settings: Settings) -> list[Check]:
    """Every check, in order; the others are skipped when Redis cannot be reached."""
    try:
        client = connect(settings)
    except SignoffError as exc:  # a cluster client asks for the map at once
        return [Check("redis", Level.FAIL, str(exc))]
    try:
        reachable, info = check_redis(client, settings)
        if reachable.level is Level.FAIL:
            return [reachable]
        broker = check_broker(client, settings)
        return [
            reachable,
            check_eviction(client, info),
            check_aof(client, info),
            check_memory(client, settings, info),
            check_password(client, settings),
            broker,
            check_workers(settings)
            if broker.level is not Level.FAIL
            else Check("workers", Level.WARN, "unknown: the broker cannot be reached"),
            check_scheduler(client, settings),
            check_metrics(settings),
            check_tracing(settings),
            check_archive(settings),
        ]
    finally:
        client.close()


# Output


_COLOURS = {Level.OK: "green", Level.WARN: "yellow", Level.FAIL: "red"}


def _show(checks: list[Check], as_json: bool) -> None:
    if as_json:
        ok = all(check.level is not Level.FAIL for check in checks)
        click.echo(json.dumps({"ok": ok, "checks": [asdict(check) for check in checks]}))
        return
    for check in checks:
        click.secho(f"{check.level.value:<4}", fg=_COLOURS[check.level], bold=True, nl=False)
        click.echo(f"  {check.name}: {check.message}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object with every check.")
def doctor(as_json: bool) -> None:
    """Check Redis (reachable, noeviction, AOF and fsync, password), the broker, workers, the
    scheduler, where metrics are served, and whether traces are sent."""
    try:
        checks = run_checks(load_settings())
    except SettingsError as exc:
        checks = [Check("settings", Level.FAIL, str(exc))]
    _show(checks, as_json)
    if any(check.level is Level.FAIL for check in checks):
        sys.exit(1)
