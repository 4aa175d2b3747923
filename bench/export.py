"""Exporting a 100,000-item batch from the real web process: its peak memory against a 1,000-item
export, CSV and JSON lines, each format in a fresh `signoff web`."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import redis

from bench.common import machine, peak_rss_mb, write_section
from bench.web import _process_tree, _stop_web, _web
from shared.batches.lines import BatchLine
from shared.local.embedded_redis import EmbeddedRedis, free_port
from shared.models.batches import BatchConfig, BatchState
from shared.models.config import ConversationConfig
from shared.models.content import Content
from shared.models.users import Role
from shared.settings import Settings
from shared.store.bundle import Stores
from shared.store.keys import KeySpace
from shared.store.users import TokenStore

ROOT = Path(__file__).resolve().parent.parent
LARGE = 100_000
SMALL = 1_000
ANSWER = "word " * 200  # 1 KB an answer: about 100 MB of export for the large batch
FILL_CHUNK = 2_000
FORMATS = ("csv", "jsonl")


def _answered_batch(admin: redis.Redis, settings: Settings, items: int) -> str:
    """A batch of `items` items, each with a turn answered as the worker's flush records it."""
    stores = Stores.build(admin, settings, None)
    store, keys = stores.batches, stores.keys
    bid = store.create(BatchConfig(conversation=ConversationConfig(), max_concurrency=1))
    store.submit(bid, (BatchLine(n, f"i{n}", Content.from_text(f"p{n}")) for n in range(items)))
    usage = {"total_token_count": 260, "cost_micros": 13, "unpriced_calls": 0}
    for start in range(0, items, FILL_CHUNK):
        raw = admin.lrange(keys.batch_items(bid), start, start + FILL_CHUNK - 1)
        with admin.pipeline(transaction=False) as pipe:
            for n, line in enumerate(raw, start):
                item = json.loads(line)
                response = {
                    "text": f"{n} {ANSWER}",
                    "structured_output": {"label": f"l{n % 7}", "score": n % 100},
                    "steps": [],
                    "usage_metadata": usage,
                }
                turn = keys.turn(item["conversation_id"], item["turn_id"])
                fields: dict[Any, Any] = {"response": json.dumps(response)}
                fields |= {"started_at": "1.0", "finished_at": "2.5"}
                pipe.hset(turn, mapping=fields)
                pipe.hset(keys.batch_states(bid), item["conversation_id"], BatchState.DONE.value)
            pipe.execute()
    return bid


def _worker_peak_mb(web_pid: int) -> float:
    """The high-water mark of the web worker (the largest process under gunicorn's master)."""
    return max(peak_rss_mb(pid) for pid in _process_tree(web_pid) if pid != web_pid)


def _download(port: int, bid: str, fmt: str, token: str) -> tuple[int, int, float]:
    """Streams one export to nowhere: bytes and lines received, seconds taken."""
    url = f"http://127.0.0.1:{port}/api/v1/batches/{bid}/results?format={fmt}"
    size = lines = 0
    started = time.perf_counter()
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.stream("GET", url, headers=headers, timeout=600) as response:
        response.raise_for_status()
        for piece in response.iter_bytes(1 << 16):
            size += len(piece)
            lines += piece.count(b"\n")
    return size, lines, time.perf_counter() - started


def _one_format(
    env: dict[str, str], batches: dict[str, str], fmt: str, token: str, logs: Path
) -> dict[str, Any]:
    """A fresh web process: the peak after starting, after the small export, after the large."""
    port = free_port()
    web = _web(env, port, logs / f"web-{fmt}.log", start_timeout_s=180)  # a busy machine
    try:
        idle = _worker_peak_mb(web.pid)
        small = _download(port, batches["small"], fmt, token)
        after_small = _worker_peak_mb(web.pid)
        large = _download(port, batches["large"], fmt, token)
        after_large = _worker_peak_mb(web.pid)
    finally:
        _stop_web(web)
    expected = {"small": SMALL, "large": LARGE}
    for name, (_, lines, _) in (("small", small), ("large", large)):
        # a header line for CSV; the answers hold no newline
        assert lines == expected[name] + (fmt == "csv"), (fmt, name, lines)
    return {"idle": idle, "small": small, "after_small": after_small, "large": large,
            "after_large": after_large}  # fmt: skip


def run() -> dict[str, float]:
    logs = Path("/tmp") / f"signoff-bench-export-{uuid.uuid4().hex[:6]}"
    logs.mkdir()
    prefix = f"bench-export-{uuid.uuid4().hex[:6]}"
    results: dict[str, dict[str, Any]] = {}
    with EmbeddedRedis() as server:
        settings = Settings(redis_url=server.url, key_prefix=prefix)
        admin = redis.Redis.from_url(server.url, decode_responses=True)
        token = TokenStore(admin, KeySpace(prefix)).create("bench", Role.VIEWER)
        started = time.perf_counter()
        batches = {
            "small": _answered_batch(admin, settings, SMALL),
            "large": _answered_batch(admin, settings, LARGE),
        }
        fill_s = time.perf_counter() - started
        env = {
            "SIGNOFF_REDIS_URL": server.url,
            "SIGNOFF_KEY_PREFIX": prefix,
            "PYTHONPATH": str(ROOT),
            "SIGNOFF_SECRET_KEY": uuid.uuid4().hex,
            "SIGNOFF_WEB_WORKERS": "1",  # one worker process: its memory is the export's
        }
        for fmt in FORMATS:
            results[fmt] = _one_format(env, batches, fmt, token, logs)
    _write(results, fill_s)
    return {
        f"{fmt}_{key}": value
        for fmt, found in results.items()
        for key, value in (
            ("large_over_small_peak", found["after_large"] / found["after_small"]),
            ("added_mb", found["after_large"] - found["after_small"]),
        )
    }


def _row(fmt: str, found: dict[str, Any]) -> str:
    small_size, _, small_s = found["small"]
    large_size, _, large_s = found["large"]
    return (
        f"| {fmt} | {found['idle']:.1f} | {small_size / 1e6:.1f} MB in {small_s:.1f} s | "
        f"{found['after_small']:.1f} | {large_size / 1e6:.1f} MB in {large_s:.1f} s | "
        f"{found['after_large']:.1f} | **{found['after_large'] / found['after_small']:.2f}** "
        f"(+{found['after_large'] - found['after_small']:.1f} MB) |"
    )


def _write(results: dict[str, dict[str, Any]], fill_s: float) -> None:
    rows = "\n".join(_row(fmt, found) for fmt, found in results.items())
    write_section(
        "export",
        f"""
## Batch export: 100,000 items from the web process (`python -m bench export`)

`signoff web` itself (gunicorn with Signoff's gevent worker, `SIGNOFF_WEB_WORKERS=1`) against a
private redis-server, on {machine()}, {os.cpu_count()} CPUs, shared with other work (the
export times are for scale only; memory is what this measures). Two batches filled as the worker
records answered items ({SMALL:,} and {LARGE:,} items, each a 1 KB answer, two structured fields
and usage; filled in {fill_s:.0f} s), then `GET /api/v1/batches/<id>/results?format=...` streamed
by a client that keeps nothing: first the small export, then the large one, in a fresh web
process for each format. The figure is the web worker's resident-memory high-water mark
(`VmHWM` of the gunicorn worker, in MB) after each export; the baseline is the same process after
the small export, so the ratio is what 100 times the rows added to the peak.

| format | idle peak | small export | peak after it | large export | peak after it | large / small peak |
|---|---|---|---|---|---|---|
{rows}
""",
    )
