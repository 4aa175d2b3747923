"""Every store on one Redis client, wired once: the client, the worker and the web share it."""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis

from shared.client.tasks import Advancer
from shared.settings import Settings
from shared.store.agents import AgentStore
from shared.store.batches import BatchStore
from shared.store.budgets import BudgetStore
from shared.store.conversations import ConversationStore
from shared.store.event_log import EventLog
from shared.store.history import HistoryStore
from shared.store.keys import KeySpace
from shared.store.notifications import NotificationStore
from shared.store.policy import PolicyStore
from shared.store.prices import PriceStore
from shared.store.schedules import ScheduleStore

__all__ = ["Stores"]


@dataclass(frozen=True)
class Stores:
    """The stores of one Redis client; `tasks` is how a resolution asks for the next leg."""

    redis: Redis
    keys: KeySpace
    settings: Settings
    conversations: ConversationStore
    events: EventLog
    notifications: NotificationStore
    batches: BatchStore
    policies: PolicyStore
    agents: AgentStore
    schedules: ScheduleStore
    prices: PriceStore
    budgets: BudgetStore

    @classmethod
    def build(cls, client: Redis, settings: Settings, tasks: Advancer | None) -> Stores:
        keys = KeySpace.of(settings)
        policies = PolicyStore(client, keys)
        agents = AgentStore(client, keys, policies)
        batches = BatchStore(client, keys, settings, tasks)
        return cls(
            redis=client,
            keys=keys,
            settings=settings,
            conversations=ConversationStore(client, keys, settings),
            events=EventLog(client, keys),
            notifications=NotificationStore(client, keys, settings, tasks),
            batches=batches,
            policies=policies,
            agents=agents,
            schedules=ScheduleStore(client, keys, agents),
            prices=PriceStore(client, keys),
            budgets=BudgetStore(client, keys, batches.dispatch),
        )

    def history(self, cid: str, *, max_history_size: int | None = None) -> HistoryStore:
        """One conversation's history; its bound only matters to writers (the worker)."""
        return HistoryStore(self.redis, self.keys, cid, max_history_size=max_history_size)
