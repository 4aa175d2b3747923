"""Outbox entries: the tasks a state write asks of a broker that its script cannot reach.

A prompt, a resolution, a batch release and a schedule fire each write state and need an
`advance` sent; were the send a step after the write, a process dying between the two
would leave the write without its task. With the state Redis as the broker the write's own
script pushes Celery's message (`shared.client.task_message`). With a broker apart it pushes
an `OutboxTask` to the outbox list in the same script instead, and the relay
(`worker/relay.py`) publishes it, at least once: an `advance` sent twice finds its work done.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from shared.client.task_message import QueuedTask
from shared.store.keys import KeySpace
from shared.tracing.carrier import trace_headers

__all__ = ["OutboxMessages", "OutboxTask"]


class OutboxTask(BaseModel):
    """A task to publish: its name, arguments and queue, and the trace it continues."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    args: list[str]
    queue: str
    headers: dict[str, str] = {}


class OutboxMessages:
    """Builds outbox entries for one queue (what `TaskMessages` is to the state Redis).

    A task is about the conversation its first argument names, and goes to the outbox of
    that conversation's shard: the script that writes it touches that shard's slot alone.
    """

    def __init__(self, *, keys: KeySpace, queue: str) -> None:
        self.keys = keys
        self.queue = queue

    def task(self, name: str, cid: str, *args: str) -> QueuedTask:
        entry = OutboxTask(task=name, args=[cid, *args], queue=self.queue, headers=trace_headers())
        return QueuedTask(self.keys.task_outbox(self.keys.shard_of(cid)), entry.model_dump_json())
