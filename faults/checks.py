"""The invariants, read from Redis and the effects file after (or during) an experiment.

- lost: a prompt whose turn is not in a terminal state;
- duplicated: a step index or step id repeated (or a gap), a turn's prompt twice, two
  results for one tool call, more turn starts than prompts sent;
- tools run twice: a call id on more than one line of the effects file;
- stranded: a pending notification of a parked conversation missing from the inbox (or
  from the deadlines, when it has one), or with no record at all;
- usage counted twice: the sum of the steps' usage differs from the conversation total.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from shared.client import Client
from shared.models.events import ConversationStatus, TurnStatus
from shared.models.notifications import NotificationStatus
from shared.models.steps import Step, StepType, UsageMetadata
from shared.store.history import HistoryStore

__all__ = [
    "Audit",
    "Turns",
    "audit",
    "effect_runs",
    "parked_on",
    "stranded",
    "turn_statuses",
    "unfinished",
    "wait_terminal",
]

# The tool result a rescuing leg writes for a call whose worker died while it ran.
EFFECT_UNKNOWN = "not run again"

Turns = dict[str, list[str]]  # conversation id -> the turn ids of the prompts sent to it


@dataclass
class Audit:
    """What the checks found; `problems` says where, for the report."""

    turns: int = 0
    lost: int = 0
    duplicated: int = 0
    tools_twice: int = 0
    stranded: int = 0
    usage_twice: int = 0
    effect_unknown: int = 0
    ended: Counter[str] = field(default_factory=Counter)  # terminal turns by status
    problems: list[str] = field(default_factory=list)

    def note(self, problem: str) -> None:
        if len(self.problems) < 20:  # enough to find them; the counts say how many
            self.problems.append(problem)


def turn_statuses(client: Client, turns: Turns) -> dict[tuple[str, str], TurnStatus | None]:
    """Each turn's status in one round trip (None: no record)."""
    pairs = [(cid, tid) for cid, tids in turns.items() for tid in tids]
    with client.redis.pipeline(transaction=False) as pipe:
        for cid, tid in pairs:
            pipe.hget(client.keys.turn(cid, tid), "status")
        found = pipe.execute()
    return {
        pair: None if raw is None else TurnStatus(raw)
        for pair, raw in zip(pairs, found, strict=True)
    }


def unfinished(client: Client, turns: Turns) -> int:
    statuses = turn_statuses(client, turns).values()
    return sum(1 for status in statuses if status is None or not status.is_terminal)


def wait_terminal(client: Client, turns: Turns, timeout_s: float) -> int:
    """Waits until every turn ended (or the timeout); returns how many have not."""
    deadline = time.monotonic() + timeout_s
    left = unfinished(client, turns)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = unfinished(client, turns)
    return left


def effect_runs(path: Path, *, by: int = 0) -> Counter[str]:
    """Runs of `record_effect` from its lines (`<call id> <note>`): by call id, or by=1 note.

    Every prompt of the suite names a note of its own, so a note twice is a tool run twice
    for one prompt even if a second model call had given it another call id.
    """
    if not path.exists():
        return Counter()
    lines = path.read_text().splitlines()
    return Counter(line.split(" ", 1)[by] for line in lines if " " in line)


def audit(client: Client, turns: Turns, effects: Path) -> Audit:
    """Every invariant over the conversations of `turns` and the effects file."""
    found = Audit(turns=sum(len(tids) for tids in turns.values()))
    for (cid, tid), status in turn_statuses(client, turns).items():
        if status is None or not status.is_terminal:
            found.lost += 1
            found.note(f"turn {tid} of {cid} is {status.value if status else 'missing'}")
        else:
            found.ended[status.value] += 1
    for cid, tids in turns.items():
        _history(client, cid, len(tids), found)
    for by in (0, 1):  # by call id, by note: the larger count
        twice = {key: runs for key, runs in effect_runs(effects, by=by).items() if runs > 1}
        found.tools_twice = max(found.tools_twice, sum(twice.values()) - len(twice))
        for key, runs in twice.items():
            found.note(f"{('call', 'note')[by]} {key}: the tool ran {runs} times")
    found.stranded = len(stranded(client, turns))
    return found


def _history(client: Client, cid: str, prompts: int, found: Audit) -> None:
    snapshot = HistoryStore(client.redis, client.keys, cid).snapshot()
    steps = snapshot.steps
    repeats = _repeats(steps, prompts, snapshot.turn_count)
    if repeats:
        found.duplicated += repeats
        found.note(f"{cid}: {repeats} duplicated step(s)")
    per_call, per_turn = _usage_of(steps)
    turns_ended = sum(1 for s in steps if s.type is StepType.FINISH) == snapshot.turn_count
    if per_call != snapshot.cumulative_usage or (
        turns_ended and per_turn != snapshot.cumulative_usage
    ):
        found.usage_twice += 1
        found.note(
            f"{cid}: model calls add up to {per_call}, turns to {per_turn}, "
            f"the total is {snapshot.cumulative_usage}"
        )
    found.effect_unknown += sum(
        1 for s in steps if s.type is StepType.TOOL_RESULT and EFFECT_UNKNOWN in s.error
    )


def _repeats(steps: list[Step], prompts: int, turn_starts: int) -> int:
    """Steps (or turn starts) that are there twice."""
    indexes = [s.step_index for s in steps]
    extra = len(indexes) - len(set(indexes))
    if sorted(set(indexes)) != list(range(len(set(indexes)))):
        extra += 1  # a gap: a step written at the wrong position
    ids = [s.id for s in steps if s.id]
    extra += len(ids) - len(set(ids))
    extra += max(0, sum(1 for s in steps if s.type is StepType.USER_INPUT) - prompts)
    extra += max(0, turn_starts - prompts)  # a tool result's id is its call's: covered above
    return extra


def _usage_of(steps: Iterable[Step]) -> tuple[UsageMetadata, UsageMetadata]:
    """The sum of the model calls' usage, and of the turns' (each Finish step holds its turn's)."""
    calls = turns = UsageMetadata()
    for step in steps:
        if step.usage_metadata is None:
            continue
        if step.type is StepType.FINISH:
            turns = turns + step.usage_metadata
        else:
            calls = calls + step.usage_metadata
    return calls, turns


def parked_on(client: Client, cids: Iterable[str]) -> list[str]:
    """The notifications that those of `cids` which wait for a person are parked on."""
    with client.redis.pipeline(transaction=False) as pipe:
        for cid in cids:
            pipe.hmget(client.keys.conversation(cid), ["status", "parked_on"])
        return [
            str(nid)
            for status, nid in pipe.execute()
            if status == ConversationStatus.WAITING_FOR_USER.value and nid
        ]


def stranded(client: Client, cids: Iterable[str]) -> list[str]:
    """Pending notifications of parked conversations that no operator would see."""
    records = client.notifications.records(parked_on(client, cids))
    lost = list(records.missing)
    pending = [n for n in records.notes if n.status is NotificationStatus.PENDING]
    with client.redis.pipeline(transaction=False) as pipe:
        for note in pending:
            pipe.zscore(client.keys.notifications_pending(), note.id)
            pipe.zscore(client.keys.notification_deadlines(), note.id)
        scores = pipe.execute()
    for note, inbox, deadline in zip(pending, scores[0::2], scores[1::2], strict=True):
        if inbox is None or (note.expires_at is not None and deadline is None):
            lost.append(note.id)
    return lost
