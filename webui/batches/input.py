"""A batch submitted through the API: its configuration and its items, checked one by one.

The items of a JSON body are checked like the lines of the CLI's file: a malformed
item becomes an `invalid` item that names its index, and the others run. A body's CSV is
read as the CLI reads a CSV file: checked whole first (a missing column refuses it), then
row by row. Pure but for reading the agent a configuration names.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from shared.batches.csv_input import check_csv, csv_items
from shared.batches.lines import BatchLine, line_options
from shared.batches.template import ColumnTemplate
from shared.errors import SignoffError
from shared.models.batches import BatchConfig
from shared.models.content import Content
from shared.settings import Settings
from shared.store.agents import AgentStore, resolve_options
from shared.validation import validate_prompt
from webui.api.models import BatchConfigBody

__all__ = ["MAX_ITEM_ID", "batch_config", "batch_lines", "csv_lines"]

MAX_ITEM_ID = 200


def batch_config(
    settings: Settings, body: BatchConfigBody, *, policy_may_loosen: bool, agents: AgentStore
) -> BatchConfig:
    """The batch's configuration; its conversation options may name an agent (read here)."""
    conversation = resolve_options(
        body.conversation, settings, policy_may_loosen=policy_may_loosen, agents=agents
    )
    return BatchConfig(conversation=conversation, max_concurrency=body.max_concurrency)


def _item(index: int, raw: Any, settings: Settings) -> BatchLine:
    fallback = f"item-{index}"
    if not isinstance(raw, dict):
        return BatchLine(index, fallback, error=f"items[{index}]: expected a JSON object")
    item_id = raw.get("id", fallback)
    if not isinstance(item_id, str | int) or not 0 < len(str(item_id)) <= MAX_ITEM_ID:
        return BatchLine(
            index, fallback, error=f"items[{index}]: 'id' must be a string of 1-200 characters"
        )
    prompt = raw.get("prompt", raw.get("content"))
    if prompt is None:
        return BatchLine(index, str(item_id), error=f"items[{index}]: missing 'prompt'")
    try:
        content = validate_prompt(
            prompt if isinstance(prompt, str) else Content.model_validate(prompt), settings
        )
        options = line_options(raw)
    except SignoffError as exc:
        return BatchLine(index, str(item_id), error=f"items[{index}]: {exc.message}")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        problem = f"prompt.{where}: {first['msg']}" if where else f"prompt: {first['msg']}"
        return BatchLine(index, str(item_id), error=f"items[{index}]: {problem}")
    return BatchLine(index, str(item_id), prompt=content, options=options)


def batch_lines(items: list[Any], settings: Settings) -> Iterator[BatchLine]:
    """Each item as a line of the batch; a repeated id is invalid, as in the CLI."""
    seen: set[str] = set()
    for index, raw in enumerate(items):
        line = _item(index, raw, settings)
        if line.id in seen and not line.error:
            line = BatchLine(
                index, f"item-{index}", error=f"items[{index}]: duplicate id {line.id!r}"
            )
        seen.add(line.id)
        yield line


def csv_lines(text: str, template: str | None, settings: Settings) -> list[BatchLine]:
    """The rows of a body's CSV as batch lines; InvalidInput, naming the line and the column,
    when the CSV or the template is wrong (nothing is created then)."""
    parsed = ColumnTemplate.parse(template) if template is not None else None
    layout = check_csv(io.StringIO(text, newline=""), parsed, name="csv")
    rows = csv_items(io.StringIO(text, newline=""), layout, settings)
    return [_id_checked(line) for line in rows]


def _id_checked(line: BatchLine) -> BatchLine:
    if line.error or len(line.id) <= MAX_ITEM_ID:
        return line
    error = f"line {line.line}: 'id' must be a string of 1-{MAX_ITEM_ID} characters"
    return BatchLine(line.line, f"line-{line.line}", error=error)
