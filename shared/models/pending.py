"""Which pending notifications a listing, a count or a bulk action means: one filter for all."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PENDING_FACETS", "PendingFilter"]

PENDING_FACETS = ("tool", "batch_id", "conversation_id")


def _seconds(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


class PendingFilter(BaseModel):
    """Pending notifications of a tool, a batch, a conversation, waiting at least `min_age_s`.

    Every facet is optional; none set means every pending notification. The web (its inbox
    query), the CLI and the MCP tools build one and hand it whole to the stores.
    """

    model_config = ConfigDict(frozen=True)

    tool: str | None = None
    batch_id: str | None = None
    conversation_id: str | None = None
    min_age_s: float | None = Field(None, ge=0)

    @property
    def facets(self) -> int:
        """How many of tool, batch and conversation are set."""
        return sum(1 for name in PENDING_FACETS if getattr(self, name))

    def aged(self, min_age_s: float | None) -> PendingFilter:
        """The same facets, waiting at least `min_age_s` (None keeps this filter's)."""
        if min_age_s is None:
            return self
        values = {name: getattr(self, name) for name in PENDING_FACETS}
        return PendingFilter(**values, min_age_s=min_age_s)

    def query(self) -> dict[str, str]:
        """The filters that are set, as query parameters."""
        found = {name: str(getattr(self, name)) for name in PENDING_FACETS if getattr(self, name)}
        if self.min_age_s is not None:
            found["min_age_s"] = _seconds(self.min_age_s)
        return found

    def describe(self) -> str:
        """The filter in words, for confirmation pages and messages."""
        parts = [f"{name.replace('_id', '')} {getattr(self, name)}" for name in PENDING_FACETS]
        chosen = [
            part for part, name in zip(parts, PENDING_FACETS, strict=True) if getattr(self, name)
        ]
        if self.min_age_s:
            chosen.append(f"waiting at least {_seconds(self.min_age_s)} s")
        return ", ".join(chosen) or "every pending notification"
