"""The console's pure helpers: relative times, request summaries, the batch bar, diffs, filters."""

from __future__ import annotations

import time

import redis

from shared.models.batches import BatchState, BatchStatus
from shared.models.config import ConversationConfig
from shared.models.content import Content
from shared.models.events import ConversationStatus, TurnStatus
from shared.models.notifications import NotificationStatus, ResolutionKind
from shared.models.steps import UsageMetadata
from shared.settings import Settings
from shared.store.conversations import ConversationRecord, ConversationStore
from shared.store.keys import KeySpace
from webui.api.models import AuditEntry, BatchSummary
from webui.audit import AuditFilter, arguments_diff
from webui.batches.bar import bar_segments, result_status
from webui.listing import ConversationFilter, ListedStatus, list_conversations
from webui.summaries import LINE_CHARS, summarize_arguments
from webui.timefmt import relative

NOW = 1_800_000_000.0


def test_relative_times_read_like_a_person_says_them() -> None:
    assert relative(NOW - 10, NOW) == "just now"
    assert relative(NOW - 180, NOW) == "3 min ago"
    assert relative(NOW - 2 * 3600, NOW) == "2 h ago"
    assert relative(NOW + 3 * 86_400, NOW) == "in 3 d"
    assert relative(NOW + 20, NOW) == "in under a minute"


def test_a_summary_puts_who_and_what_first_and_stays_on_one_short_line() -> None:
    args = {"body": "long text\nwith lines", "subject": "Invoice 12", "to": "ana@example.org"}
    assert summarize_arguments(args).startswith("to=ana@example.org · subject=Invoice 12 · body=")
    assert "\n" not in summarize_arguments(args)
    assert len(summarize_arguments({f"k{i}": "x" * 80 for i in range(10)})) == LINE_CHARS
    assert summarize_arguments({"n": [1, 2]}) == "n=[1, 2]"


def _summary(counts: dict[BatchState, int], denied: int) -> BatchSummary:
    return BatchSummary(
        id="b",
        status=BatchStatus.RUNNING,
        total=sum(counts.values()),
        finished=0,
        counts={state: counts.get(state, 0) for state in BatchState},
        denied=denied,
        usage=UsageMetadata(),
        max_concurrency=1,
        provider="scripted",
        model="demo",
        created_at=NOW,
        pending_approvals=0,
    )


def test_the_bar_shows_denied_items_apart_from_done_ones_and_fills_exactly() -> None:
    batch = _summary({BatchState.DONE: 6, BatchState.FAILED: 1, BatchState.WAITING: 3}, denied=2)
    segments = {s.state: s for s in bar_segments(batch)}
    assert (segments["done"].count, segments["denied"].count) == (4, 2)
    assert segments["denied"].x == segments["done"].width == 40.0
    assert sum(s.width for s in segments.values()) == 100.0
    assert result_status({"status": "done", "denied": 1}) == "denied"
    assert result_status({"status": "done", "denied": 0}) == "done"


def test_edited_arguments_diff_line_by_line() -> None:
    lines = arguments_diff({"a": 1, "b": "x"}, {"a": 1, "b": "y"})
    assert (" ", '  "a": 1,') in lines
    assert ("-", '  "b": "x"') in lines and ("+", '  "b": "y"') in lines


def _record(status: ConversationStatus, last: TurnStatus | None, title: str) -> ConversationRecord:
    return ConversationRecord(
        conversation_id="c-1",
        config=ConversationConfig(metadata={"team": "Billing"}),
        status=status,
        closed=False,
        active_turn="",
        created_at=NOW,
        updated_at=NOW,
        queued=0,
        title=title,
        last_turn_status=last,
    )


def test_a_conversation_is_listed_failed_only_while_its_failed_turn_is_the_last_word() -> None:
    failed = _record(ConversationStatus.IDLE, TurnStatus.FAILED, "Refund order 7")
    running = _record(ConversationStatus.RUNNING, TurnStatus.FAILED, "Refund order 7")
    assert ListedStatus.of(failed) is ListedStatus.FAILED
    assert ListedStatus.of(running) is ListedStatus.RUNNING
    assert ConversationFilter(ListedStatus.FAILED).matches(failed)
    assert not ConversationFilter(ListedStatus.IDLE).matches(failed)
    assert ConversationFilter(search="refund ORDER").matches(failed)
    assert ConversationFilter(search="billing").matches(failed)  # a metadata value
    assert not ConversationFilter(search="zebra").matches(failed)


def test_a_headline_is_the_first_non_blank_line_cut_short() -> None:
    assert Content.from_text("\n\n  Summarise this\nand that").headline == "Summarise this"
    assert Content.from_text("/help").headline == "/help"
    assert len(Content.from_text("x" * 500).headline) == 120


def test_the_audit_filter_matches_decisions_and_outcomes() -> None:
    entry = AuditEntry(
        id="1-0",
        notification_id="c.1",
        conversation_id="c",
        batch_id="b-1",
        status=NotificationStatus.RESOLVED,
        actor="ana",
        at=NOW,
        kind=ResolutionKind.DENY,
        tool="send_email",
        reason="no",
    )
    assert AuditFilter(actor="ana", decision="deny", batch_id="b-1").matches(entry)
    assert not AuditFilter(decision="allow").matches(entry)
    assert not AuditFilter(tool="calculator").matches(entry)
    expired = entry.model_copy(update={"kind": None, "status": NotificationStatus.EXPIRED})
    assert AuditFilter(decision="expired").matches(expired)


def test_a_filtered_listing_reads_no_further_than_its_scan_limit(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    store = ConversationStore(real_redis, keys, Settings())
    made = []
    for i in range(12):
        cid = store.create(ConversationConfig(), conversation_id=f"c{i:02d}")
        store.submit(cid, Content.from_text(f"task {i}\nsecond line"))
        if i % 3 == 0:  # c00, c03, c06, c09 failed
            real_redis.hset(keys.conversation(cid), "last_turn_status", "failed")
        made.append(cid)
        time.sleep(0.002)  # distinct creation times: newest first is c11
    failed = ConversationFilter(ListedStatus.FAILED)
    every = list_conversations(store, offset=0, limit=10, where=failed)
    assert [r.conversation_id for r in every.records] == ["c09", "c06", "c03", "c00"]
    assert not every.truncated and every.records[0].title == "task 9"
    newest = list_conversations(store, offset=0, limit=10, where=failed, scan_limit=5)
    assert [r.conversation_id for r in newest.records] == ["c09"] and newest.truncated
    found = list_conversations(store, offset=0, limit=10, where=ConversationFilter(search="TASK 1"))
    assert [r.conversation_id for r in found.records] == ["c11", "c10", "c01"]
