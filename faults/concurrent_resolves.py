"""Concurrent resolves: each pending notification resolved by many HTTP requests at once.

`signoff web` as deployed (gunicorn, its default workers and threads); every request is a
new connection, all released together, half of them allowing and half denying. Per
notification exactly one 200 and the rest 409, no 5xx; the notification ends as its 200 said,
audited once, and its tool runs once if Allow won, never if Deny did. A 429 or 503 that
carries Retry-After says the server is saturated: it is counted apart and retried after the
time it names, as a client should.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from faults.checks import Turns, audit, effect_runs, parked_on, wait_terminal
from faults.harness import stack
from faults.report import Result
from shared.client import Client
from shared.models.notifications import NotificationStatus

__all__ = ["FULL", "QUICK", "Size", "run"]

SATURATED = (429, 503)
ATTEMPTS = 5
WARM_REQUESTS = 20
# Half the requests for each notification allow it, half deny it: one of them must win.
DECISIONS = [{"kind": "allow"}, {"kind": "deny", "reason": "a concurrent operator said no"}]


@dataclass(frozen=True)
class Size:
    notifications: int
    requests: int = 20  # per notification, all at once
    timeout_s: float = 60.0  # per request


QUICK = Size(notifications=10)
FULL = Size(notifications=50)


@dataclass
class Answers:
    """Every request's final answer, by notification; saturation answers apart."""

    codes: dict[str, Counter[str]] = field(default_factory=dict)
    won: dict[str, str] = field(default_factory=dict)  # the kind each 200 was for
    saturated: Counter[int] = field(default_factory=Counter)
    seconds: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, nid: str, code: str, seconds: float) -> None:
        with self.lock:
            self.codes.setdefault(nid, Counter())[code] += 1
            self.seconds.append(seconds)


def run(size: Size, workdir: Path, rng: random.Random) -> Result:
    total = size.notifications * size.requests
    result = Result(
        "concurrent resolves", f"{size.notifications} x {size.requests} = {total:,} requests"
    )
    with stack("concurrent-resolves", workdir) as built, built.client() as client:
        web = built.web()
        built.worker("resolves", concurrency=4)
        built.beat()
        for service in built.services:
            if service is not web:
                service.wait_ready()
        built.wait_web(web)
        token = built.operator_token(client)
        turns, notes = _park(client, size.notifications)
        _warm(built.web_url, token)
        answers = _storm(built.web_url, token, list(notes), size)
        _judge(result, client, answers, list(notes), size)
        left = wait_terminal(client, turns, 60)
        if left:
            result.fail(f"{left} turn(s) did not end after their approval")
        result.absorb(audit(client, turns, built.effects))
        _check_effects(result, answers, notes, effect_runs(built.effects, by=1))
    return result


def _park(client: Client, count: int) -> tuple[Turns, dict[str, str]]:
    """`count` conversations waiting for an approval: their turns, and each notification's note."""
    turns: Turns = {}
    for index in range(count):
        conversation = client.new_conversation(tools={"record_effect": "ask"})
        turn = conversation.send(f'call record_effect {{"note": "resolve-{index}"}}')
        turns[conversation.conversation_id] = [turn]
    notes = {cid: f"resolve-{index}" for index, cid in enumerate(turns)}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        nids = parked_on(client, turns)
        if len(nids) == count:
            return turns, {nid: notes[nid.rpartition(".")[0]] for nid in nids}
        time.sleep(0.1)
    raise RuntimeError(f"only {len(nids)} of {count} conversations parked in 60 s")


def _warm(url: str, token: str) -> None:
    """Reads the inbox from many threads, so every web worker has loaded the app."""
    threads = [
        threading.Thread(
            target=httpx.get,
            args=(f"{url}/api/v1/notifications?limit=1",),
            kwargs={"headers": {"Authorization": f"Bearer {token}"}, "timeout": 30},
            daemon=True,
        )
        for _ in range(WARM_REQUESTS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)


def _storm(url: str, token: str, nids: list[str], size: Size) -> Answers:
    """`size.requests` requests per notification, every thread released at the same moment."""
    answers = Answers()
    go = threading.Event()
    threads = [
        threading.Thread(
            target=_request,
            args=(url, token, nid, DECISIONS[i % 2], size, go, answers),
            daemon=True,
        )
        for nid in nids
        for i in range(size.requests)
    ]
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join(size.timeout_s * ATTEMPTS)
    return answers


def _request(
    url: str,
    token: str,
    nid: str,
    decision: dict[str, str],
    size: Size,
    go: threading.Event,
    answers: Answers,
) -> None:
    # made before the release: building a client costs ~25 ms of CPU (its TLS context)
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=size.timeout_s) as http:
        go.wait()
        _resolve(http, f"{url}/api/v1/notifications/{nid}/resolve", nid, decision, answers)


def _resolve(
    http: httpx.Client, url: str, nid: str, decision: dict[str, str], answers: Answers
) -> None:
    """One operator's resolution: retried after a saturation answer's Retry-After."""
    started = time.monotonic()
    for _ in range(ATTEMPTS):
        try:
            reply = http.post(url, json=decision)
        except httpx.HTTPError as exc:
            answers.add(nid, type(exc).__name__, time.monotonic() - started)
            return
        retry_after = reply.headers.get("Retry-After")
        if reply.status_code in SATURATED and retry_after is not None:
            with answers.lock:
                answers.saturated[reply.status_code] += 1
            time.sleep(min(float(retry_after), 5.0))
            continue
        answers.add(nid, str(reply.status_code), time.monotonic() - started)
        if reply.status_code == 200:
            answers.won[nid] = decision["kind"]
        return
    answers.add(nid, "still saturated", time.monotonic() - started)


def _judge(result: Result, client: Client, answers: Answers, nids: list[str], size: Size) -> None:
    result.http_5xx = sum(
        n for codes in answers.codes.values() for code, n in codes.items() if code.startswith("5")
    )
    result.winners = sum(1 for codes in answers.codes.values() if codes["200"] > 1)
    unresolved = [nid for nid in nids if answers.codes.get(nid, Counter())["200"] == 0]
    if unresolved:
        result.fail(f"{len(unresolved)} notification(s) got no 200")
    others = Counter(
        code
        for codes in answers.codes.values()
        for code in codes.elements()
        if code not in ("200", "409") and not code.startswith("5")
    )
    if others:
        result.fail(f"answers other than 200, 409 and 5xx: {dict(others)}")
    answered = sum(sum(codes.values()) for codes in answers.codes.values())
    if answered != len(nids) * size.requests:
        result.fail(f"{len(nids) * size.requests - answered} request(s) never answered")
    _check_records(result, client, answers, nids)
    times = sorted(answers.seconds)
    saturated = ", ".join(f"{n} x {code}" for code, n in sorted(answers.saturated.items()))
    result.notes.append(
        f"answers {_summary(answers)}; saturation answers with Retry-After (retried): "
        f"{saturated or 'none'}; request time median {statistics.median(times):.2f} s, "
        f"max {times[-1]:.2f} s"
    )


def _check_records(result: Result, client: Client, answers: Answers, nids: list[str]) -> None:
    """Each notification resolved once, as its one 200 said, with one audit entry."""
    notes = client.notifications.load(nids)
    wrong = [
        n.id
        for n in notes
        if n.status is not NotificationStatus.RESOLVED
        or n.resolution is None
        or n.resolution.kind != answers.won.get(n.id)
    ]
    if wrong or len(notes) != len(nids):
        result.fail(
            f"{len(wrong)} notification(s) not resolved as their 200 said, "
            f"{len(nids) - len(notes)} gone"
        )
    audited = Counter(
        entry["notification_id"]
        for entry in client.notifications.audit(count=10 * len(nids) + 100)
        if entry["notification_id"] in set(nids)
    )
    twice = [nid for nid in nids if audited[nid] > 1]
    if twice:
        result.winners = (result.winners or 0) + len(twice)
        result.fail(f"{len(twice)} notification(s) audited more than once")


def _check_effects(
    result: Result, answers: Answers, notes: dict[str, str], runs: Counter[str]
) -> None:
    """The tool ran once where Allow won, and never where Deny won."""
    allowed = [nid for nid, kind in answers.won.items() if kind == "allow"]
    missing = [nid for nid in allowed if runs[notes[nid]] != 1]
    denied_ran = [nid for nid, kind in answers.won.items() if kind != "allow" and runs[notes[nid]]]
    if missing or denied_ran:
        result.fail(
            f"{len(missing)} allowed call(s) not run once, {len(denied_ran)} denied one(s) run"
        )
    result.notes.append(f"Allow won {len(allowed)} times, Deny {len(answers.won) - len(allowed)}")


def _summary(answers: Answers) -> str:
    codes: Counter[str] = Counter()
    for per in answers.codes.values():
        codes.update(per)
    return ", ".join(f"{n:,} x {code}" for code, n in sorted(codes.items()))
