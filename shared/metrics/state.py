"""Gauges read from Redis when the web is scraped: what waits, and for how long.

Nothing keeps these numbers up to date between scrapes: each scrape counts the inbox's
indexes, the broker's queues and the running batches, in two round trips. Every web
process answers with the same values, so aggregate them with max(), not sum().
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import redis
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from shared.client.broker import uses_outbox
from shared.client.tasks import queue_name, webhook_queue_name
from shared.metrics import series
from shared.models.batches import BatchState, BatchStatus
from shared.settings import Settings
from shared.store.budgets import today
from shared.store.keys import KeySpace

__all__ = ["BATCHES_READ", "StateCollector"]

BATCHES_READ = 1_000  # the newest batches read for the batch gauges; older ones have ended
_RUNNING = (BatchStatus.SUBMITTING.value, BatchStatus.RUNNING.value)


class StateCollector(Collector):
    """Approvals pending (by tool, in batches), the oldest one's age, queue depth, batch items,
    and how much of each agent's daily budget is used."""

    def __init__(self, client: redis.Redis, keys: KeySpace, settings: Settings) -> None:
        self.client = client
        self.keys = keys
        # what waits where Redis can count it: the broker's lists, or the outbox of a broker
        # apart (RabbitMQ counts its own queues: its Prometheus plugin)
        # (name, list): the outbox has one list per state shard, summed
        self.queues = (
            [("outbox", key) for key in keys.every_shard(keys.task_outbox)]
            if uses_outbox(settings)
            else [
                ("turns", keys.celery_queue(queue_name(settings))),
                ("webhooks", keys.celery_queue(webhook_queue_name(settings))),
            ]
        )

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily("signoff_redis_up", "Whether the scrape could read Redis.")
        try:
            found = list(self._read())
        except redis.RedisError:
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        return [up, *found]

    def _read(self) -> Iterable[Metric]:
        keys = self.keys
        tools = sorted(str(t) for t in self.client.hkeys(keys.tool_catalog()))
        with self.client.pipeline(transaction=False) as pipe:
            pipe.zcard(keys.notifications_pending())
            pipe.zrange(keys.notifications_pending(), 0, 0, withscores=True)
            for tool in tools:
                pipe.zcard(keys.notifications_pending_by("tool", tool))
            for _, key in self.queues:
                pipe.llen(key)
            pipe.zrevrange(keys.batches(), 0, BATCHES_READ - 1)
            replies: list[Any] = pipe.execute()
        total, oldest = int(replies[0]), replies[1]
        by_tool = dict(zip(tools, (int(n) for n in replies[2 : 2 + len(tools)]), strict=True))
        depths = replies[2 + len(tools) : 2 + len(tools) + len(self.queues)]
        yield _pending(total, by_tool)
        age = GaugeMetricFamily(
            "signoff_approvals_oldest_pending_age_seconds",
            "How long the oldest pending request has waited (0 when none waits).",
        )
        age.add_metric([], max(time.time() - float(oldest[0][1]), 0.0) if oldest else 0.0)
        yield age
        depth = GaugeMetricFamily(
            "signoff_queue_depth",
            "Tasks waiting in the broker's queue (in the task outbox, with a broker apart).",
            labels=["queue"],
        )
        counts: dict[str, int] = {}
        for (name, _), count in zip(self.queues, depths, strict=True):
            counts[name] = counts.get(name, 0) + int(count)
        for name, count in counts.items():
            depth.add_metric([name], count)
        yield depth
        yield from self._batches([str(b) for b in replies[-1]])
        yield self._agent_budgets()

    def _batches(self, ids: list[str]) -> Iterable[Metric]:
        fields = ["status", *(f"count:{state.value}" for state in BatchState)]
        with self.client.pipeline(transaction=False) as pipe:
            for bid in ids:
                pipe.hmget(self.keys.batch(bid), fields)
                pipe.zcard(self.keys.notifications_pending_by("batch", bid))
            replies: list[Any] = pipe.execute()
        items = dict.fromkeys(BatchState, 0)
        running = waiting = 0
        for meta, pending in zip(replies[::2], replies[1::2], strict=True):
            if meta[0] not in _RUNNING:
                continue
            running += 1
            waiting += int(pending)
            for state, count in zip(BatchState, meta[1:], strict=True):
                items[state] += int(count or 0)
        yield _gauge("signoff_batches_running", "Batches submitting or running.", running)
        yield _gauge(
            "signoff_batch_approvals_pending",
            "Pending requests of running batches' items.",
            waiting,
        )
        family = GaugeMetricFamily(
            "signoff_batch_items", "Items of running batches by state.", labels=["state"]
        )
        for state, count in items.items():
            family.add_metric([state.value], count)
        yield family

    def _agent_budgets(self) -> GaugeMetricFamily:
        """How much of each agent's daily budget is spent or reserved today, per unit."""
        family = GaugeMetricFamily(
            "signoff_agent_budget_used_ratio",
            "Today's spent and reserved share of each agent's daily budget (1: exhausted).",
            labels=["agent", "unit"],
        )
        agents = sorted(str(a) for a in self.client.hkeys(self.keys.agents()))
        day = today()
        with self.client.pipeline(transaction=False) as pipe:
            for agent in agents:
                pipe.hmget(self.keys.budget("agent", agent), _LIMITS)
                pipe.hmget(self.keys.budget_day("agent", agent, day), _USED)
            replies: list[Any] = pipe.execute()
        for agent, limits, used in zip(agents, replies[::2], replies[1::2], strict=True):
            for unit, limit, spent, reserved in zip(
                _UNITS, limits, used[::2], used[1::2], strict=True
            ):
                if limit is not None and int(limit) > 0:
                    share = (int(spent or 0) + int(reserved or 0)) / int(limit)
                    family.add_metric([series.AGENT(agent), unit], share)
        return family


_UNITS = ("tokens", "cost")
_LIMITS = ["limit:tokens", "limit:micros"]
_USED = ["spent:tokens", "reserved:tokens", "spent:micros", "reserved:micros"]


def _pending(total: int, by_tool: dict[str, int]) -> GaugeMetricFamily:
    """Pending requests by tool; those of a tool no worker describes count as `other`."""
    family = GaugeMetricFamily(
        "signoff_approvals_pending", "Requests waiting for a person, by tool.", labels=["tool"]
    )
    for tool, count in by_tool.items():
        family.add_metric([tool], count)
    family.add_metric(["other"], max(total - sum(by_tool.values()), 0))
    return family


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation)
    family.add_metric([], value)
    return family
