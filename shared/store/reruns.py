"""Re-running a batch: a new batch of the same inputs with another agent, version, model or
model settings, linked to the batch it re-runs (its `source`).

The new batch's items are the source's, in the same order, with the same ids and line
numbers: each prompt and its prompt options read from the item's turn, a chunk of items at
a time (bounded memory for any size), and submitted as a file's lines are. An item that
never ran (its input was invalid) is filed invalid again, with the same error, so the two
batches line up item by item. Its configuration is the source's with the changes
(`rerun_config`); who submits the re-run is the owner its calls count against.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from shared.batches.lines import BatchLine
from shared.errors import Conflict, InvalidInput
from shared.models.batches import BatchConfig, RerunChanges
from shared.models.config import ConversationConfig, ConversationOptions, PromptOptions
from shared.models.content import Content
from shared.models.model_settings import check_supported
from shared.store.agents import AgentStore, resolve_options
from shared.store.batches import BatchStore, SubmitReport
from shared.store.connection import storage_errors
from shared.store.conversations import new_id

__all__ = ["BatchRerun", "rerun_config"]


def rerun_config(
    source: ConversationConfig, changes: RerunChanges, store: BatchStore, agents: AgentStore
) -> ConversationConfig:
    """The source's configuration with the changes; InvalidInput naming what cannot be."""
    if changes.agent is None and changes.agent_version is None:
        update: dict[str, Any] = {"submitted_by": None}
        update |= changes.model_dump(include={"provider", "model"}, exclude_none=True)
        if changes.model_settings is not None:
            update["model_settings"] = changes.model_settings.over(source.model_settings)
        config = source.model_copy(update=update)
        check_supported(config.provider, config.model_settings)
        return config
    if changes.provider is not None or changes.model is not None:
        raise InvalidInput("an agent decides its provider and model: give an agent or a model")
    agent = changes.agent or source.agent
    if agent is None:
        raise InvalidInput("agent_version: the source ran as no agent; name one to run")
    options = ConversationOptions(
        agent=agent, agent_version=changes.agent_version, model_settings=changes.model_settings
    )
    return resolve_options(options, store.settings, policy_may_loosen=False, agents=agents)


class BatchRerun:
    """Makes a batch's re-run and submits its items (again, to finish one cut short)."""

    def __init__(self, store: BatchStore, agents: AgentStore) -> None:
        self.store = store
        self.agents = agents

    def rerun(
        self,
        source: str,
        changes: RerunChanges,
        *,
        created_by: str = "",
        batch_id: str | None = None,
    ) -> tuple[str, SubmitReport]:
        """The re-run's id and what was submitted; the same id again goes on submitting."""
        info = self.store.info(source)
        config = rerun_config(info.config.conversation, changes, self.store, self.agents)
        bid = batch_id or new_id()[:16]
        if bid == source or (self.store.exists(bid) and self.store.info(bid).source != source):
            raise Conflict(f"batch {bid} exists and is not a re-run of {source}")
        cap = changes.max_concurrency or info.config.max_concurrency
        made = BatchConfig(conversation=config, max_concurrency=cap)
        bid = self.store.create(made, batch_id=bid, created_by=created_by, source=source)
        report = self.store.submit(bid, self.inputs(source))
        self.store.finish_submission(bid)
        return bid, report

    def inputs(self, bid: str) -> Iterator[BatchLine]:
        """The batch's items as input lines, in order: each prompt and its options."""
        for _, items in self.store.item_chunks(bid):
            yield from self._lines(bid, items)

    def _lines(self, bid: str, items: list[dict[str, Any]]) -> Iterator[BatchLine]:
        client, keys = self.store.client, self.store.keys
        with (
            storage_errors(f"reading items of batch {bid}"),
            client.pipeline(transaction=False) as pipe,
        ):
            for item in items:
                turn = keys.turn(item["conversation_id"], item["turn_id"] or "-")
                pipe.hmget(turn, ["prompt", "options"])
            replies = pipe.execute()
        for item, (prompt, options) in zip(items, replies, strict=True):
            yield _line(item, prompt, options)


def _line(item: dict[str, Any], prompt: str | None, options: str | None) -> BatchLine:
    number, item_id = int(item["line"]), str(item["id"])
    if not item.get("turn_id") or not prompt:
        return BatchLine(number, item_id, error=item.get("error") or "its prompt never ran")
    try:
        chosen = PromptOptions.model_validate_json(options or "{}")
        content = Content.model_validate_json(prompt)
    except ValidationError:
        return BatchLine(number, item_id, error="its prompt in the source does not parse")
    return BatchLine(number, item_id, content, options=None if chosen.is_empty() else chosen)
