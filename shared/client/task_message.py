"""An `advance` task message as the broker stores it, for a script to queue in its own write.

Celery's `send_task` spends about a millisecond of Python per message and a round trip
of its own. A resolution instead hands this message to its compare-and-set script,
which pushes it with the decision: one write, and no resolution without its
continuation. The format is Celery's message protocol 2 (JSON body, base64 encoded) in
the envelope kombu's Redis transport keeps in a queue's list; a test compares it with
what `send_task` itself queues, so a Celery or kombu upgrade that changes it is seen.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import uuid
from dataclasses import dataclass

from shared.tracing.carrier import trace_headers

__all__ = ["QueuedTask", "TaskMessages"]

_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


@dataclass(frozen=True)
class QueuedTask:
    """A task message and the broker list it goes to (LPUSH; workers pop the other end)."""

    key: str
    message: str


class TaskMessages:
    """Builds task messages for one queue, addressed as the Redis transport addresses it."""

    def __init__(self, *, key_prefix: str, queue: str, reply_to: str) -> None:
        self.queue = queue
        self.key = f"{key_prefix}{queue}"
        self.reply_to = reply_to
        self.origin = f"{os.getpid()}@{socket.gethostname()}"

    def task(self, name: str, *args: str) -> QueuedTask:
        task_id = str(uuid.uuid4())
        body = json.dumps([list(args), {}, _EMBED])
        envelope = {
            "body": base64.b64encode(body.encode()).decode("ascii"),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {
                "lang": "py",
                "task": name,
                "id": task_id,
                "shadow": None,
                "eta": None,
                "expires": None,
                "group": None,
                "group_index": None,
                "retries": 0,
                "timelimit": [None, None],
                "root_id": task_id,
                "parent_id": None,
                "argsrepr": repr(list(args)),
                "kwargsrepr": "{}",
                "origin": self.origin,
                "ignore_result": None,
                "replaced_task_nesting": 0,
                "stamped_headers": None,
                "stamps": {},
                **trace_headers(),
            },
            "properties": {
                "correlation_id": task_id,
                "reply_to": self.reply_to,
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": self.queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
        return QueuedTask(self.key, json.dumps(envelope))
