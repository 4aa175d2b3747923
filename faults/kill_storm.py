"""Kill storm: workers SIGKILLed at random moments while conversations run side-effecting tools.

Every prompt calls `record_effect` (it appends its call id to the effects file, then takes
`effect_delay_s`), and the model streams slowly, so kills land mid-model-call and mid-tool.
A killed worker is started again at once. Afterwards every turn must have ended, once, and
every call must have run at most once: one cut by a kill is reported "effect unknown".
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from faults.checks import Turns, audit, unfinished, wait_terminal
from faults.harness import Service, stack
from faults.report import Result

__all__ = ["FULL", "QUICK", "Size", "run"]


@dataclass(frozen=True)
class Size:
    conversations: int
    prompts: int  # per conversation, queued at once
    kills: int
    workers: int = 3
    concurrency: int = 2
    gap_s: tuple[float, float] = (0.5, 2.5)  # between kills, uniformly at random
    token_delay_ms: int = 40
    effect_delay_s: float = 0.5
    settle_s: float = 120.0  # after the last kill, for every turn to end


QUICK = Size(conversations=12, prompts=3, kills=5, gap_s=(0.3, 1.2))
FULL = Size(conversations=50, prompts=3, kills=20)


def prompt(cid_index: int, number: int) -> str:
    return f'call record_effect {{"note": "storm-{cid_index}-{number}"}}'


def run(size: Size, workdir: Path, rng: random.Random) -> Result:
    result = Result("kill storm", f"{size.conversations} conversations, {size.kills} kills")
    env = {
        "SIGNOFF_SWEEP_INTERVAL_S": "0.5",
        "SIGNOFF_SCRIPTED_TOKEN_DELAY_MS": str(size.token_delay_ms),
        "SIGNOFF_TEST_EFFECT_DELAY_S": str(size.effect_delay_s),
    }
    with stack("kill-storm", workdir, **env) as built, built.client() as client:
        workers = [
            built.worker(f"storm{i}", concurrency=size.concurrency) for i in range(size.workers)
        ]
        built.beat().wait_ready()
        for worker in workers:
            worker.wait_ready()
        turns: Turns = {}
        for index in range(size.conversations):
            conversation = client.new_conversation(allow_all=True)
            sent = [conversation.send(prompt(index, n)) for n in range(size.prompts)]
            turns[conversation.conversation_id] = sent
        result.kills = _storm(workers, size, rng, lambda: unfinished(client, turns) > 0)
        if result.kills < size.kills:
            result.fail(f"only {result.kills} of {size.kills} kills made: the work ended first")
        left = wait_terminal(client, turns, size.settle_s)
        if left:
            result.fail(f"{left} turn(s) still unfinished {size.settle_s:.0f} s after the storm")
        result.absorb(audit(client, turns, built.effects))
        resent = built.sweep_counts()["resent"]
        result.notes.append(
            f"the sweep sent `advance` {resent} times for work without a lease (legs cut by a "
            "kill, and conversations still waiting in the queue for a worker)"
        )
    return result


def _storm(workers: list[Service], size: Size, rng: random.Random, busy: Callable[[], bool]) -> int:
    """Kills a ready worker at random moments while turns run, restarting it; the kills made."""
    made = 0
    for _ in range(size.kills):
        time.sleep(rng.uniform(*size.gap_s))
        if not busy():
            break  # every turn ended: a kill now would prove nothing
        victim = _ready_victim(workers, rng)
        victim.kill()
        victim.start()  # at once, as a supervisor would; it boots while the others work
        made += 1
    for worker in workers:
        if worker.exited:  # died on its own: a supervisor would start it again
            worker.start()
        worker.wait_ready()
    return made


def _ready_victim(workers: list[Service], rng: random.Random) -> Service:
    """A worker that is up (waiting, briefly, for one to finish booting)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready = [w for w in workers if w.ready()]
        if ready:
            return rng.choice(ready)
        time.sleep(0.05)
    raise RuntimeError("no worker became ready in 60 s")
