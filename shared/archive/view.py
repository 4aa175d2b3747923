"""An archived conversation as its read-only page and the API show it, from its file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from shared.archive.snapshot import KeyDump
from shared.errors import CorruptRecord
from shared.models.config import ConversationConfig
from shared.models.steps import USAGE_FIELDS, Step, UsageMetadata

__all__ = ["ArchivedConversation"]


@dataclass(frozen=True)
class ArchivedConversation:
    conversation_id: str
    archived_at: float
    config: ConversationConfig
    title: str
    owner: str
    created_at: float
    updated_at: float
    steps: list[Step]
    trimmed: int  # steps trimmed from its history before it was archived
    usage: UsageMetadata
    turn_count: int

    @classmethod
    def from_file(cls, header: dict[str, Any], dumps: list[KeyDump]) -> ArchivedConversation:
        by_name = {str(d["name"]): d["value"] for d in dumps}
        conv, meta = by_name.get("conv") or {}, by_name.get("hmeta") or {}
        cid = str(header.get("conversation_id", ""))
        try:
            config = ConversationConfig.model_validate_json(conv.get("config", ""))
            steps = [Step.model_validate_json(raw) for raw in by_name.get("steps") or []]
        except ValidationError as exc:
            raise CorruptRecord(
                f"the archive of {cid} does not parse: {exc.errors()[0]['msg']}"
            ) from exc
        usage = by_name.get("usage") or {}
        return cls(
            conversation_id=cid,
            archived_at=float(header.get("archived_at", 0)),
            config=config,
            title=str(conv.get("title", "")),
            owner=str(conv.get("owner", "")),
            created_at=float(conv.get("created_at", 0)),
            updated_at=float(conv.get("updated_at", 0)),
            steps=steps,
            trimmed=int(meta.get("trimmed", 0) or 0),
            usage=UsageMetadata(**{name: int(usage.get(name, 0)) for name in USAGE_FIELDS}),
            turn_count=len(by_name.get("turns") or []),
        )

    def summary(self) -> dict[str, Any]:
        """What the API answers for it."""
        return {
            "conversation_id": self.conversation_id,
            "archived": True,
            "archived_at": self.archived_at,
            "title": self.title,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "turn_count": self.turn_count,
            "usage": self.usage.model_dump(),
            "steps": [json.loads(step.model_dump_json()) for step in self.steps],
        }
