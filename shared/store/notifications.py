"""Notifications in Redis: reading, listing, and resolving them exactly once.

Resolving is a compare-and-set from `pending` in one script on the notification's
hash (which lives in its conversation's slot): the first resolution wins and every
later one gets a Conflict that says what happened. The script also judges the deadline,
by Redis's clock: a resolution after it expires the notification instead. The API, the
UI, the CLI and the client all resolve through `NotificationStore.resolve`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import ValidationError

from shared.client.task_message import QueuedTask
from shared.client.tasks import QueuesAdvance
from shared.errors import Conflict, CorruptRecord, Forbidden, InvalidInput, NotFound
from shared.models.config import ToolPolicy
from shared.models.notifications import (
    RESOLUTION,
    Allow,
    DeliveryEntry,
    Deny,
    Notification,
    NotificationStatus,
    PassiveEvent,
    QuorumAllow,
    Resolution,
    ResolutionKind,
    Submit,
)
from shared.models.pending import PendingFilter
from shared.schema import schema_violations
from shared.store.base import AdvancingStore
from shared.store.connection import ReplicaWait, storage_errors
from shared.store.conversations import ConversationStore, allow_field
from shared.store.emit import EMIT_LUA
from shared.store.inbox_index import (
    INDEXED_FIELD,
    InboxIndex,
    facets,
    index_commands,
    queue_unindex,
)
from shared.store.keys import ID_PATTERN
from shared.store.lua import LuaScript
from shared.store.policy import PolicyStore
from shared.store.webhooks import queue_event
from shared.webhooks.payloads import approval_settled

__all__ = [
    "AUDIT_MAXLEN",
    "CLAIMED_BY",
    "Check",
    "NotificationStore",
    "OnSettled",
    "Records",
    "audit_entry",
    "index_commands",
]

AUDIT_MAXLEN = 100_000
_ID = re.compile(ID_PATTERN)

log = logging.getLogger(__name__)


class Check(Protocol):
    """Refuses (Forbidden) a notification its caller may not resolve; `identity` is who
    approves (distinct identities make a quorum): `shared.approvers.ResolveCheck`."""

    @property
    def identity(self) -> str: ...

    def __call__(self, note: Notification) -> None: ...


# Given settled notifications and ids without a record that are still in the indexes.
OnSettled = Callable[[list[Notification], list[str]], None]


@dataclass
class Records:
    """Notifications read by id: parsed, without a record, corrupt, marked indexed."""

    notes: list[Notification] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    indexed: set[str] = field(default_factory=set)


# The compare-and-set that settles a notification (its deadline judged by Redis's clock).
_RESOLVE = LuaScript(
    "shared.store",
    "notification_resolve.lua",
    keys=["notification", "events"],
    args=["request"],
    decode=["request"],
    uses=[EMIT_LUA],
)

EXPIRY_ACTOR = "system:expiry"
CLAIMED_BY = "claimed_by"  # who claimed a pending notification (shared/store/claims.py)
_ALLOW_FIELD = "allow:"  # `allow:<approver>` = the arguments' hash: an allow towards a quorum
EXPIRED = Deny(reason="expired")
# Deadline entries read per page by `expire_due`, and at most per pass: stale entries
# are dropped as they are met, so they never hold back the notifications behind them.
EXPIRY_PAGE = 500
EXPIRY_SCAN_CAP = 20_000


def _when(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class NotificationStore(AdvancingStore):
    """Pending and past notifications across all conversations."""

    @functools.cached_property
    def index(self) -> InboxIndex:
        return InboxIndex(self.client, self.keys)

    # Reading

    def get(self, nid: str) -> Notification:
        with storage_errors(f"reading notification {nid}"):
            raw: dict[str, str] = self.client.hgetall(self.keys.notification(nid))  # type: ignore[assignment]
        if not raw:
            raise NotFound(f"notification {nid} does not exist")
        return self.parse(nid, raw)

    def parse(self, nid: str, raw: dict[str, str]) -> Notification:
        """A notification from its hash, as HGETALL (or a script) returned it."""
        try:
            note = Notification.model_validate_json(raw["doc"])
            resolution = (
                RESOLUTION.validate_json(raw["resolution"]) if raw.get("resolution") else None
            )
            return note.model_copy(
                update={
                    "status": NotificationStatus(raw.get("status", "pending")),
                    "resolution": resolution,
                    "resolved_by": raw.get("resolved_by") or None,
                    "resolved_at": float(raw["resolved_at"]) if raw.get("resolved_at") else None,
                    "approvals_needed": int(raw["quorum"]) if raw.get("quorum") else None,
                    "allowed_by": [
                        QuorumAllow(by=name.removeprefix(_ALLOW_FIELD), arguments_hash=value)
                        for name, value in sorted(raw.items())
                        if name.startswith(_ALLOW_FIELD)
                    ],
                    "claimed_by": raw.get(CLAIMED_BY) or None,
                    "claimed_at": float(raw["claimed_at"]) if raw.get("claimed_at") else None,
                }
            )
        except (KeyError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise CorruptRecord(f"{self.keys.notification(nid)} does not parse") from exc

    def pending(
        self,
        where: PendingFilter | None = None,
        /,
        *,
        offset: int = 0,
        limit: int = 50,
        **facets: Any,
    ) -> list[Notification]:
        """A page of the pending notifications `where` (or the facets) matches, oldest first."""
        return self.load(self.pending_ids(_where(where, facets), offset=offset, limit=limit))

    def pending_ids(
        self,
        where: PendingFilter | None = None,
        /,
        *,
        offset: int = 0,
        limit: int = 50,
        **facets: Any,
    ) -> list[str]:
        """The ids of `pending`'s page, for `load` (which can leave unreadable ones out)."""
        where = _where(where, facets)
        with (
            storage_errors("listing notifications"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            index = self._index(pipe, where)
            pipe.zrangebyscore(index, "-inf", _newest(where), start=offset, num=limit)
            return [str(i) for i in pipe.execute()[-1]]

    def count_pending(self, where: PendingFilter | None = None, /, **facets: Any) -> int:
        """How many pending notifications match `where` (or the facets given)."""
        where = _where(where, facets)
        with (
            storage_errors("counting notifications"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            index = self._index(pipe, where)
            pipe.zcount(index, "-inf", _newest(where))
            return int(pipe.execute()[-1])

    def count_pending_each(self, groups: list[tuple[str | None, str | None]]) -> list[int]:
        """`count_pending(batch_id=, tool=)` of each (batch id, tool) pair, in one round trip:
        a page of batches or of inbox groups shows a count per row."""
        if not groups:
            return []
        with (
            storage_errors("counting notifications"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            positions = []
            for batch_id, tool in groups:
                pipe.zcard(self._index(pipe, PendingFilter(tool=tool, batch_id=batch_id)))
                positions.append(len(pipe) - 1)
            replies = pipe.execute()
        return [int(replies[i]) for i in positions]

    def recent(self, *, offset: int = 0, limit: int = 50) -> list[Notification]:
        """Every notification, newest first, whatever its status."""
        with storage_errors("listing notifications"):
            ids = self.client.zrevrange(self.keys.notifications_all(), offset, offset + limit - 1)
        return self.load([str(i) for i in ids])

    def _index(self, pipe: Any, where: PendingFilter) -> str:
        """The index to read: one facet's, or (queued on `pipe`) the intersection of several."""
        facets = [
            (name, value)
            for name, value in (
                ("conversation", where.conversation_id),
                ("batch", where.batch_id),
                ("tool", where.tool),
            )
            if value
        ]
        if not facets:
            return self.keys.notifications_pending()
        sources = [self.keys.notifications_pending_by(name, value) for name, value in facets]
        if len(sources) == 1:
            return sources[0]
        digest = hashlib.sha256("\0".join(sources).encode()).hexdigest()[:24]
        matching = self.keys.notifications_pending_matching(digest)
        pipe.zinterstore(matching, sources, aggregate="MIN")
        pipe.expire(matching, 10)
        return matching

    def load(
        self, ids: list[str], *, on_corrupt: Callable[[CorruptRecord], None] | None = None
    ) -> list[Notification]:
        """The notifications of `ids` that exist, in one round trip.

        One that does not parse raises `CorruptRecord`, or, given `on_corrupt`, is reported
        to it and left out: one bad record cannot take the inbox down.
        """
        with (
            storage_errors("reading notifications"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for nid in ids:
                pipe.hgetall(self.keys.notification(nid))
            raws = pipe.execute()
        found: list[Notification] = []
        for nid, raw in zip(ids, raws, strict=True):
            if not raw:
                continue
            try:
                found.append(self.parse(nid, raw))
            except CorruptRecord as exc:
                if on_corrupt is None:
                    raise
                on_corrupt(exc)
        return found

    def audit(self, *, count: int = 100, before: str = "+") -> list[dict[str, Any]]:
        """Audit entries, newest first."""
        with storage_errors("reading the audit log"):
            entries: Any = self.client.xrevrange(self.keys.audit(), max=before, count=count)
        return [{"id": entry_id, **fields} for entry_id, fields in entries]

    # Resolving

    def resolve(
        self,
        nid: str,
        resolution: Resolution | dict[str, Any],
        *,
        actor: str,
        check: Check | None = None,
        audit_scope: str = "",
    ) -> Notification:
        """Validates, then compare-and-sets from pending; the first resolution wins.

        `check` (the caller's `shared.approvers.ResolveCheck`) may refuse the notification
        first; `audit_scope` (the resolver's role and scopes) goes into the audit entry.
        """
        note = self.get(nid)
        if check is not None:
            check(note)
        decision = self._validated(note, resolution)
        quorum = self.quorum(note) if isinstance(decision, Allow) else 1
        self._cas(
            note,
            NotificationStatus.RESOLVED,
            decision,
            actor,
            audit_scope=audit_scope,
            quorum=quorum,
            approver=check.identity if check is not None else actor,
        )
        settled = self.get(nid)
        if isinstance(decision, Allow) and decision.sticky and settled.resolution is not None:
            if decision.sticky == "batch" and note.batch_id and note.tool_name:
                # before the siblings are settled, so that an item deciding now runs unasked
                # (the resumed leg writes the same; it came too late for an item that parked
                # between this scan and that leg: seen under the gevent worker)
                with storage_errors(f"allowing {note.tool_name} for batch {note.batch_id}"):
                    self.client.hset(
                        self.keys.batch(note.batch_id), allow_field(note.tool_name), "1"
                    )
            self._allow_siblings(note, decision.sticky, actor, check, audit_scope)
        return settled

    def quorum(self, note: Notification) -> int:
        """How many distinct approvers must allow `note`: its tool's `ask` rule's `approvals`."""
        tool = note.tool_name
        if tool is None:
            return 1
        rules = PolicyStore(self.client, self.keys).load()
        if not any(rule.tool == tool and rule.approvals > 1 for rule in rules.rules):
            return 1
        try:
            record = ConversationStore(self.client, self.keys, self.settings).get(
                note.conversation_id
            )
            labels = record.config.labels
        except NotFound:
            labels = []
        rule = rules.rule_for(tool, batch_id=note.batch_id, labels=labels)
        return rule.approvals if rule is not None and rule.policy is ToolPolicy.ASK else 1

    def _allow_siblings(
        self,
        note: Notification,
        scope: str,
        actor: str,
        check: Check | None = None,
        audit_scope: str = "",
    ) -> None:
        """A sticky allow also settles what already waits for the same tool in its scope."""
        where = (
            PendingFilter(tool=note.tool_name, batch_id=note.batch_id)
            if scope == "batch"
            else PendingFilter(tool=note.tool_name, conversation_id=note.conversation_id)
        )
        for sibling in self.pending(where, limit=10_000):
            if sibling.id == note.id or sibling.tool_name != note.tool_name:
                continue
            try:
                if check is not None:
                    check(sibling)  # a scoped approver's sticky allow stays in its scopes
                self._cas(
                    sibling,
                    NotificationStatus.RESOLVED,
                    Allow(),
                    f"{actor} (sticky {scope})",
                    audit_scope=audit_scope,
                )
            except (Conflict, Forbidden):
                continue

    def expire(self, nid: str) -> bool:
        """Resolves an overdue notification as denied, reason "expired"; False if not pending.

        Also False before its deadline by Redis's clock, which decides both ways.
        """
        note = self.get(nid)
        try:
            return self._cas(note, NotificationStatus.EXPIRED, EXPIRED, EXPIRY_ACTOR)
        except Conflict:
            return False

    def cancel(self, nid: str) -> bool:
        """Marks a pending notification cancelled (its turn was aborted); False if not pending."""
        note = self.get(nid)
        try:
            self._cas(note, NotificationStatus.CANCELLED, None, "system:abort", advance=False)
        except Conflict:
            return False
        return True

    def expire_due(
        self, *, now: float | None = None, limit: int = 500, on_settled: OnSettled | None = None
    ) -> list[str]:
        """Expires up to `limit` pending notifications past their deadline; returns their ids.

        Entries whose notification is no longer pending (a resolver died before its
        clean-up) or has no record go to `on_settled` as they are met (by default they
        are dropped from the indexes), and do not count against `limit`.
        """
        now = self.clock() if now is None else now
        settle = on_settled or self._unindex
        expired: list[str] = []
        kept = examined = 0  # entries left in place: not due by Redis's clock, or corrupt
        while len(expired) < limit and examined < EXPIRY_SCAN_CAP:
            with storage_errors("finding expired notifications"):
                due = self.client.zrangebyscore(
                    self.keys.notification_deadlines(), "-inf", now, start=kept, num=EXPIRY_PAGE
                )
            if not due:
                break
            examined += len(due)
            kept += self._expire_page([str(i) for i in due], expired, limit, settle)
        return expired

    def _expire_page(
        self, ids: list[str], expired: list[str], limit: int, settle: OnSettled
    ) -> int:
        """Expires the page's pending notifications into `expired`; returns how many stay."""
        found = self.records(ids)
        pending = [n for n in found.notes if n.status is NotificationStatus.PENDING]
        settle(
            [n for n in found.notes if n.status is not NotificationStatus.PENDING], found.missing
        )
        kept = len(found.corrupt)
        for note in pending:
            if len(expired) >= limit:
                break
            try:
                if self._cas(note, NotificationStatus.EXPIRED, EXPIRED, EXPIRY_ACTOR):
                    expired.append(note.id)
                else:
                    kept += 1  # not due yet by Redis's clock
            except (Conflict, NotFound):  # settled (or gone) meanwhile: we clean up too
                settle([note], [])
        return kept

    def _unindex(self, notes: list[Notification], missing: list[str]) -> None:
        self.index.unindex(notes, missing=missing)

    def clock(self) -> float:
        """Redis's time: the clock deadlines are judged by, the same for every process."""
        with storage_errors("reading Redis's clock"):
            seconds, micros = self.client.time()
        return float(seconds) + float(micros) / 1_000_000

    def records(self, ids: list[str]) -> Records:
        """The notifications of `ids` in one round trip, sorted by what was found."""
        named = [nid for nid in ids if _well_formed(nid)]
        with (
            storage_errors("reading notifications"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            for nid in named:
                pipe.hgetall(self.keys.notification(nid))
            raws = pipe.execute()
        found = Records(missing=[nid for nid in ids if not _well_formed(nid)])
        for nid, raw in zip(named, raws, strict=True):
            if not raw:
                found.missing.append(nid)
                continue
            try:
                found.notes.append(self.parse(nid, raw))
            except CorruptRecord as exc:
                log.warning("left in the indexes: %s", exc)
                found.corrupt.append(nid)
                continue
            if raw.get(INDEXED_FIELD):
                found.indexed.add(nid)
        return found

    def _validated(self, note: Notification, resolution: Resolution | dict[str, Any]) -> Resolution:
        try:
            decision = RESOLUTION.validate_python(resolution)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'resolution'}: {e['msg']}" for e in exc.errors()
            )
            raise InvalidInput(f"invalid resolution: {problems}") from exc
        kind = ResolutionKind(decision.kind)
        if kind not in note.allowed:
            allowed = ", ".join(k.value for k in note.allowed)
            raise InvalidInput(f"notification {note.id} accepts {allowed}; not {kind.value}")
        _check_content(note, decision)
        return decision

    def _cas(
        self,
        note: Notification,
        status: NotificationStatus,
        decision: Resolution | None,
        actor: str,
        *,
        advance: bool = True,
        audit_scope: str = "",
        quorum: int = 1,
        approver: str = "",
    ) -> bool:
        """Settles `note` from pending; False for an expiry before the deadline.

        After the deadline, any other settlement expires the notification instead (and
        cleans up as an expiry does) and raises a Conflict saying so.
        """
        now = time.time()
        keys = [self.keys.notification(note.id), self.keys.events(note.conversation_id)]
        queued = None  # `advance` pushed by the script itself, when this store can build it
        if advance and isinstance(self.tasks, QueuesAdvance):
            queued = self.tasks.queued_advance(note.conversation_id)
        with storage_errors(f"resolving notification {note.id}"):
            argument = self._cas_argument(note, status, decision, actor, now, queued)
            argument["quorum"] = quorum
            argument["approver"] = approver or actor
            argument["pin"] = _pin(note, decision)
            reply = self._resolve_script(keys, json.dumps(argument), note.id)
        send = advance and queued is None
        if reply[0] == "early":
            return False
        if reply[0] == "parked":  # an allow short of its quorum: recorded and audited
            self._audit(note, NotificationStatus.PENDING, decision, actor, now, audit_scope)
            return True
        if reply[0] == "expired_now":
            at = float(reply[1])
            self._settled(note, NotificationStatus.EXPIRED, EXPIRED, EXPIRY_ACTOR, at, send)
            raise _conflict(note, [NotificationStatus.EXPIRED.value, EXPIRY_ACTOR, reply[1], ""])
        if reply[0] != "ok":
            raise _conflict(note, reply)
        self._settled(note, status, decision, actor, now, send, audit_scope)
        return True

    def _resolve_script(self, keys: list[str], argument: str, nid: str) -> Any:
        """The settlement script, followed by WAIT for replicas when the operator asks."""
        wait = ReplicaWait.of(self.settings)
        if wait is None:
            return _RESOLVE(self.client, keys, [argument])
        with self.client.pipeline(transaction=False) as pipe:
            _RESOLVE(pipe, keys, [argument])
            wait.queue(pipe)
            reply, acknowledged = pipe.execute()
        wait.check(acknowledged, f"settling notification {nid}")
        return reply

    def _settled(
        self,
        note: Notification,
        status: NotificationStatus,
        decision: Resolution | None,
        actor: str,
        at: float,
        advance: bool,
        audit_scope: str = "",
    ) -> None:
        """What follows a compare-and-set: the conversation's next leg, then indexes and audit.

        The leg is asked for first, so that the turn goes on while these are written: they
        are written even if the ask fails (the sweep re-sends `advance` for such a turn).
        """
        try:
            if advance and self.tasks is not None:
                self.tasks.advance(note.conversation_id)
        finally:
            self._after(note, status, decision, actor, at, audit_scope)

    def _cas_argument(
        self,
        note: Notification,
        status: NotificationStatus,
        decision: Resolution | None,
        actor: str,
        now: float,
        queued: QueuedTask | None,
    ) -> dict[str, Any]:
        return dict(
            {
                "queue": queued.key if queued else "",
                "task": queued.message if queued else "",
                "status": status.value,
                "resolution": decision.model_dump_json() if decision else "",
                "actor": actor,
                "at": repr(now),
                "maxlen": str(self.settings.stream_maxlen),
                "ttl_ms": str(self.settings.events_ttl_s * 1000),
                "channels": [self.keys.live(note.conversation_id), self.keys.live_all()],
                "cid": note.conversation_id,
                "turn_id": note.turn_id,
                "nid": note.id,
                "expires_at": "" if note.expires_at is None else repr(note.expires_at),
                "expired": EXPIRED.model_dump_json(),
                "expiry_actor": EXPIRY_ACTOR,
            }
        )

    def _audit(
        self,
        note: Notification,
        status: NotificationStatus,
        decision: Resolution | None,
        actor: str,
        now: float,
        audit_scope: str,
    ) -> None:
        """An audit entry alone: an allow that counts towards a quorum."""
        entry = audit_entry(note, status, decision, actor, now, audit_scope)
        with storage_errors(f"auditing notification {note.id}"):
            self.client.xadd(self.keys.audit(), entry, maxlen=AUDIT_MAXLEN, approximate=True)  # type: ignore[arg-type]

    def _after(
        self,
        note: Notification,
        status: NotificationStatus,
        decision: Resolution | None,
        actor: str,
        now: float,
        audit_scope: str = "",
    ) -> None:
        """Writes the audit entry and drops the notification from the pending indexes."""
        entry = audit_entry(note, status, decision, actor, now, audit_scope)
        with (
            storage_errors(f"indexing notification {note.id}"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            pipe.xadd(self.keys.audit(), entry, maxlen=AUDIT_MAXLEN, approximate=True)  # type: ignore[arg-type]
            if status is NotificationStatus.EXPIRED:
                self._notify_expired(pipe, note)
            kind = decision.kind if decision is not None else ""
            event = approval_settled(note, status, actor, now, kind)
            if event is not None:
                queue_event(pipe, self.keys, event, self.keys.shard_of(note.conversation_id))
            queue_unindex(pipe, self.keys, note.id, facets(self.keys, note))
            pipe.execute()

    def _notify_expired(self, pipe: Any, note: Notification) -> None:
        delivery = DeliveryEntry.passive(
            f"{note.id}-expired",
            conversation_id=note.conversation_id,
            turn_id=note.turn_id,
            event=PassiveEvent.NOTIFICATION_EXPIRED,
            title=f"Expired: {note.title}",
        ).fields()
        for stream in (
            self.keys.conversation_notifications(note.conversation_id),
            self.keys.notification_stream(self.keys.shard_of(note.conversation_id)),
        ):
            pipe.xadd(stream, delivery, maxlen=self.settings.stream_maxlen, approximate=True)


def audit_entry(
    note: Notification,
    status: NotificationStatus,
    decision: Resolution | None,
    actor: str,
    at: float,
    scope: str = "",
) -> dict[str, str | float]:
    """The audit log's record of one settlement of `note`; `scope` is the resolver's role and
    scopes (empty for the system and direct clients)."""
    return {
        "notification_id": note.id,
        "conversation_id": note.conversation_id,
        "batch_id": note.batch_id or "",
        "status": status.value,
        "actor": actor,
        "at": at,
        "kind": decision.kind if decision else "",
        "tool": note.tool_name or "",
        "arguments_before": json.dumps(note.tool_call.args if note.tool_call else None),
        "arguments_after": json.dumps(_arguments_after(note, decision)),
        "reason": decision.reason if isinstance(decision, Deny) else "",
        "scope": scope,
        "claimed_by": note.claimed_by or "",
    }


def _pin(note: Notification, decision: Resolution | None) -> str:
    """The hash of the arguments an allow runs the call with: allows count together only when
    they allow the same arguments (an edit must be allowed as edited)."""
    arguments = _arguments_after(note, decision) if isinstance(decision, Allow) else None
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _well_formed(nid: str) -> bool:
    cid, _, suffix = nid.rpartition(".")
    return bool(cid and suffix and _ID.fullmatch(nid))


def _arguments_after(note: Notification, decision: Resolution | None) -> Any:
    if isinstance(decision, Allow):
        return (
            decision.arguments
            if decision.arguments is not None
            else (note.tool_call.args if note.tool_call else None)
        )
    if isinstance(decision, Submit):
        return decision.content
    return None


def _check_content(note: Notification, decision: Resolution) -> None:
    if isinstance(decision, Submit) and note.submit_schema is not None:
        problems = schema_violations(decision.content, note.submit_schema, name="schema")
        if problems:
            raise InvalidInput("submitted content is invalid: " + "; ".join(problems))
    if isinstance(decision, Allow) and decision.arguments is not None and note.arguments_schema:
        problems = schema_violations(decision.arguments, note.arguments_schema, name="parameters")
        if problems:
            raise InvalidInput("edited arguments are invalid: " + "; ".join(problems))
    if isinstance(decision, Allow) and decision.sticky == "batch" and not note.batch_id:
        raise InvalidInput(
            f"notification {note.id} is not part of a batch; sticky 'batch' is not possible"
        )


def _conflict(note: Notification, reply: list[Any]) -> Exception:
    status, nid = reply[0], note.id
    if status == "not_found":
        return NotFound(f"notification {nid} does not exist")
    by, at, raw = reply[1], float(reply[2] or 0), reply[3]
    if status == NotificationStatus.EXPIRED.value:
        deadline = note.expires_at if note.expires_at is not None else at
        return Conflict(
            f"notification {nid} expired at {_when(deadline)} and was denied with reason 'expired'"
        )
    if status == NotificationStatus.CANCELLED.value:
        return Conflict(f"notification {nid} was cancelled at {_when(at)}: its turn was aborted")
    kind = json.loads(raw).get("kind", "?") if raw else "?"
    return Conflict(f"notification {nid} was already resolved ({kind}) by {by} at {_when(at)}")


def _where(where: PendingFilter | None, facets: dict[str, Any]) -> PendingFilter:
    """The filter given whole, or built from keyword facets (`pending(batch_id=...)`)."""
    if where is not None and facets:
        raise TypeError("give a PendingFilter or facets, not both")
    unknown = facets.keys() - PendingFilter.model_fields.keys()
    if unknown:
        raise TypeError(f"unknown pending-notification filters: {sorted(unknown)}")
    return where if where is not None else PendingFilter(**facets)


def _newest(where: PendingFilter) -> float | str:
    """The newest creation time `where` admits (its minimum age ago), as a ZSET bound."""
    return "+inf" if where.min_age_s is None else time.time() - where.min_age_s
