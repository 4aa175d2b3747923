"""The gate at a batch body's items: their keys, checked before any item is read.

The rules themselves (roles, tool policy, ids and owners) are `shared.gate`'s, shared
with the MCP server; this is the part only the web's batch body has.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from shared.gate import Caller, check_tool_options, is_operator
from shared.models.config import ConversationOptions
from shared.store.batches import not_item_fields, unknown_item_keys
from shared.store.policy import PolicyStore
from webui.errors import HttpProblem

__all__ = ["check_item_keys"]

_GATE_KEYS = ("tools", "allow_all", "labels")


def check_item_keys(
    principal: Caller, policies: PolicyStore, items: list[Any], *, batch_id: str | None
) -> None:
    """A batch item's keys are item fields: a loosening key is a 403 (below the operator
    role, as on a conversation), any other unknown key a 422, each naming `items[i].<key>`."""
    for index, raw in enumerate(items):
        unknown = unknown_item_keys(raw) if isinstance(raw, dict) else []
        if not unknown:
            continue
        prefix = f"items[{index}]."
        if not is_operator(principal):
            _check_item_gate_keys(principal, policies, raw, batch_id=batch_id, prefix=prefix)
        details = [
            {"loc": ["items", index, key], "message": "not an item field"} for key in unknown
        ]
        message = f"{prefix}{unknown[0]}: {not_item_fields(unknown)}"
        raise HttpProblem(422, "invalid_input", message, details=details)


def _check_item_gate_keys(
    principal: Caller,
    policies: PolicyStore,
    raw: dict[str, Any],
    *,
    batch_id: str | None,
    prefix: str,
) -> None:
    """The 403 a conversation asking for the item's tool policy keys would get, if any."""
    gate = {key: raw[key] for key in _GATE_KEYS if key in raw}
    try:
        asked = ConversationOptions.model_validate(gate)
    except ValidationError:
        return  # malformed: refused as not an item field
    check_tool_options(
        principal,
        policies,
        tools=asked.tools,
        allow_all=asked.allow_all,
        labels=asked.labels,
        batch_id=batch_id,
        prefix=prefix,
    )
