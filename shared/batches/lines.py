"""A line of batch input as an item: its number, its id, and its prompt or what is wrong.

A JSONL line (`parse_line`) or an API item carries an id, a prompt and the item's own prompt
options; anything else is refused, naming the keys (`unknown_item_keys`). Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from shared.errors import SignoffError
from shared.models.config import PromptOptions
from shared.models.content import Content
from shared.settings import Settings
from shared.validation import prompt_options, validate_prompt

__all__ = [
    "ITEM_FIELDS",
    "BatchLine",
    "line_options",
    "not_item_fields",
    "parse_line",
    "unknown_item_keys",
]


@dataclass(frozen=True)
class BatchLine:
    """One input line: its number, its id, and its prompt or what was wrong with it."""

    line: int
    id: str
    prompt: Content | None = None
    error: str = ""
    options: PromptOptions | None = None  # this item's prompt options, over the batch's


def parse_line(number: int, raw: str, settings: Settings) -> BatchLine | None:
    """One JSONL line as an item; None for a blank line; an error names what was wrong."""
    if not raw.strip():
        return None
    fallback = f"line-{number}"
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return BatchLine(number, fallback, error=f"line {number}: not JSON ({exc})")
    if not isinstance(data, dict):
        return BatchLine(number, fallback, error=f"line {number}: expected a JSON object")
    item_id = str(data.get("id", fallback))
    prompt = data.get("prompt", data.get("content"))
    if prompt is None:
        return BatchLine(number, item_id, error=f"line {number}: missing 'prompt'")
    if unknown := unknown_item_keys(data):
        return BatchLine(number, item_id, error=f"line {number}: {not_item_fields(unknown)}")
    try:
        content = validate_prompt(
            prompt if isinstance(prompt, str) else Content.model_validate(prompt), settings
        )
        options = line_options(data)
    except (SignoffError, ValidationError) as exc:
        return BatchLine(number, item_id, error=f"line {number}: {exc}")
    return BatchLine(number, item_id, prompt=content, options=options)


# What an item (a line of a file, an element of the API's `items`) may carry.
ITEM_FIELDS = ("id", "prompt", "content", *PromptOptions.model_fields)


def unknown_item_keys(data: dict[str, Any]) -> list[str]:
    """The keys of an item that are not item fields (a tool policy key is the batch's)."""
    return [key for key in data if key not in ITEM_FIELDS]


def not_item_fields(keys: list[str]) -> str:
    """Why `keys` are refused, naming them: what an item carries, and where options go."""
    return (
        f"{', '.join(map(repr, keys))}: not an item field (an item carries "
        f"{', '.join(ITEM_FIELDS)}); tool policy and other conversation options are the "
        "batch's, for every item"
    )


def line_options(data: dict[str, Any]) -> PromptOptions:
    """The prompt options a line (or API item) carries beside its prompt, checked."""
    return prompt_options(**{name: data.get(name) for name in PromptOptions.model_fields})
