"""Appending one step: cost must not grow with history size, and it is one round trip."""

from __future__ import annotations

import uuid

from bench.common import counting_client, median, round_trips, timed, write_section
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.steps import Step, StepSource, StepTarget, StepType
from shared.store.history import HistoryStore
from shared.store.keys import KeySpace

KEYS = KeySpace("bench")
STEP = Step(
    type=StepType.TEXT_RESPONSE,
    source=StepSource.MODEL,
    target=StepTarget.USER,
    content="a typical answer of a few dozen words " * 4,
    is_complete_response=True,
)
SAMPLES = 2000


def _store(client: object, retained: int, limit: int) -> HistoryStore:
    store = HistoryStore(client, KEYS, uuid.uuid4().hex, max_history_size=limit)  # type: ignore[arg-type]
    batch = [STEP] * 1000
    for _ in range(retained // 1000):
        store.append(*batch)
    return store


def _per_append_us(stores: dict[str, HistoryStore]) -> dict[str, float]:
    """Median µs per append of each case, the cases interleaved round by round so that the
    machine's drift (these machines are noisy) falls on all of them alike."""
    runs: dict[str, list[float]] = {name: [] for name in stores}
    for _ in range(SAMPLES // 100):
        for name, store in stores.items():
            runs[name].append(timed(lambda s=store: [s.append(STEP) for _ in range(100)]) / 100)
    return {name: median(values) * 1e6 for name, values in runs.items()}


def run() -> dict[str, float]:
    with EmbeddedRedis() as server:
        client = counting_client(server.url)
        cases = {
            "1k retained (unlimited)": _store(client, 1_000, 0),
            "10k retained (unlimited)": _store(client, 10_000, 0),
            "100k retained (unlimited)": _store(client, 100_000, 0),
            "trimming at 10k": _store(client, 10_000, 10_000),
        }
        timings = _per_append_us(cases)
        trips = round_trips(lambda: cases["trimming at 10k"].append(STEP, start_turn=True))
        assert cases["trimming at 10k"].length() == 10_000
    baseline = timings["1k retained (unlimited)"]
    rows = "\n".join(f"| {name} | {us:.1f} | {us / baseline:.2f} |" for name, us in timings.items())
    ratio = timings["100k retained (unlimited)"] / baseline
    write_section(
        "history",
        f"""
## History: appending one step (`python -m bench history`)

Median over {SAMPLES} appends (rounds of 100, the cases interleaved round by round) of one step to a
conversation that already retains N steps, on a private redis-server. Baseline: 1k retained.

| case | µs per append | ratio to 1k |
|---|---|---|
{rows}

- 100k/1k ratio: **{ratio:.2f}** (target: at most 1.2).
- Round trips per append (counted at the socket; append with a turn start, usage and trimming): **{trips}** (target: 1).
""",
    )
    return {"ratio_100k_1k": ratio, "round_trips": trips}


if __name__ == "__main__":
    print(run())
