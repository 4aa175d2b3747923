"""Comparing two runs of the same inputs: both batches' results read side by side, a chunk of
each at a time, so a comparison of any size holds two chunks (`shared.batches.compare` says
what differs). Two runs line up when they hold the same item ids in the same order: a re-run
and its source do, and so does one file run twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice, zip_longest
from typing import Any

from shared.batches.compare import Tally, compare_pair
from shared.errors import InvalidInput
from shared.models.batches import CompareOutcome, CompareShow
from shared.store.batches import BatchStore

__all__ = ["BatchComparison"]

_MISSING: dict[str, Any] = {"id": None}


class BatchComparison:
    """Two batches' items, paired by position, checked to be the same items."""

    def __init__(self, store: BatchStore, first: str, second: str) -> None:
        self.store, self.first, self.second = store, first, second

    def check_aligned(self) -> None:
        """InvalidInput, naming the first place they part, unless both hold the same items in
        the same order (reads the items as filed, not their results)."""
        chunks = zip_longest(
            self.store.item_chunks(self.first), self.store.item_chunks(self.second)
        )
        for a, b in chunks:
            ids_a = [str(i["id"]) for i in a[1]] if a else []
            ids_b = [str(i["id"]) for i in b[1]] if b else []
            if ids_a != ids_b:
                start = (a or b)[0]
                self._parted(start, ids_a, ids_b)

    def items(
        self, show: CompareShow | None = None, *, limit: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """Each item's comparison, in input order (those `show` takes, of the first `limit`)."""
        for first, second in islice(self._pairs(), limit):
            compared = compare_pair(first, second)
            if show is None or show.takes(CompareOutcome(compared["outcome"])):
                yield compared

    def summary(self, *, limit: int | None = None) -> dict[str, Any]:
        """The tally of every item (or of the first `limit`: `truncated` says whether more
        were left), and each batch's status and whole usage (every attempt)."""
        tally, pairs = Tally(), self._pairs()
        for first, second in islice(pairs, limit):
            tally.add(compare_pair(first, second))
        truncated = limit is not None and next(pairs, None) is not None
        runs = {
            name: self.store.info(bid)
            for name, bid in (("first", self.first), ("second", self.second))
        }
        batches = {
            name: {
                "id": info.batch_id,
                "status": info.status.value,
                "total": info.total,
                "usage": info.usage.model_dump(),
                "source": info.source or None,
            }
            for name, info in runs.items()
        }
        return {**tally.summary(), "batches": batches, "truncated": truncated}

    def _pairs(self) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        pairs = zip_longest(self.store.results(self.first), self.store.results(self.second))
        for n, (first, second) in enumerate(pairs):
            a, b = first or _MISSING, second or _MISSING
            if a["id"] != b["id"]:
                self._parted(n, [a["id"]], [b["id"]])
            yield a, b

    def _parted(self, start: int, ids_a: list[Any], ids_b: list[Any]) -> None:
        at = next((n for n, (x, y) in enumerate(zip_longest(ids_a, ids_b)) if x != y), 0)
        mine = ids_a[at] if at < len(ids_a) else None
        theirs = ids_b[at] if at < len(ids_b) else None
        raise InvalidInput(
            f"batches {self.first} and {self.second} are not runs of the same inputs: item "
            f"{start + at} is {_named(mine)} in one and {_named(theirs)} in the other "
            "(compare a re-run with its source, or one file run twice)"
        )


def _named(item_id: Any) -> str:
    return "missing" if item_id is None else repr(item_id)
