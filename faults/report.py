"""One experiment's result, the table of all of them, and its section of docs/reliability.md."""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from faults.checks import Audit

__all__ = ["DOC", "Result", "render", "write_section"]

DOC = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"

# (column, attribute): None in a cell means the experiment does not measure it
COLUMNS = [
    ("kills", "kills"),
    ("turns", "turns"),
    ("lost", "lost"),
    ("duplicated", "duplicated"),
    ("tools run twice", "tools_twice"),
    ("stranded approvals", "stranded"),
    ("usage counted twice", "usage_twice"),
    ("5xx", "http_5xx"),
    ("more than one winner", "winners"),
    ("late", "late"),
]
# The columns that must read 0 (or be unmeasured) for the experiment to pass.
INVARIANTS = ["lost", "duplicated", "tools_twice", "stranded", "usage_twice"]
INVARIANTS += ["http_5xx", "winners", "late"]


@dataclass
class Result:
    """What one experiment did and found; `failures` lists every invariant that failed."""

    name: str
    size: str
    kills: int | None = None
    turns: int | None = None
    lost: int = 0
    duplicated: int = 0
    tools_twice: int = 0
    stranded: int = 0
    usage_twice: int = 0
    http_5xx: int | None = None
    winners: int | None = None
    late: int | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def absorb(self, found: Audit) -> None:
        """Takes the counts of an audit (adding to what is there) and its findings."""
        self.turns = (self.turns or 0) + found.turns
        self.lost += found.lost
        self.duplicated += found.duplicated
        self.tools_twice += found.tools_twice
        self.stranded += found.stranded
        self.usage_twice += found.usage_twice
        self.notes.append(
            "turns ended " + ", ".join(f"{n} {status}" for status, n in sorted(found.ended.items()))
        )
        if found.effect_unknown:
            self.notes.append(
                f"{found.effect_unknown} tool call(s) cut by a kill were reported "
                "'effect unknown' to the model, not run again"
            )
        self.failures += found.problems
        ended_otherwise = found.turns - found.lost - found.ended["completed"]
        if ended_otherwise:
            self.fail(f"{ended_otherwise} turn(s) failed or were cancelled instead of completing")

    def fail(self, why: str) -> None:
        self.failures.append(why)

    def close(self) -> Result:
        """Adds a failure for each invariant column that is not 0."""
        for name in INVARIANTS:
            value = getattr(self, name)
            if value:
                self.failures.insert(0, f"{name.replace('_', ' ')}: {value}")
        return self

    @property
    def passed(self) -> bool:
        return not self.failures


def _cell(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def render(results: list[Result]) -> str:
    """The table, then a line of notes and failures per experiment."""
    head = ["experiment", "size", *(title for title, _ in COLUMNS), "time", "result"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for result in results:
        cells = [result.name, result.size]
        cells += [_cell(getattr(result, attribute)) for _, attribute in COLUMNS]
        cells += [f"{result.seconds:.0f} s", "pass" if result.passed else "**FAIL**"]
        rows.append("| " + " | ".join(cells) + " |")
    lines = ["\n".join(rows), ""]
    for result in results:
        said = [*result.notes, *(f"FAILED: {why}" for why in result.failures)]
        if said:
            lines.append(f"- {result.name}: " + "; ".join(said) + ".")
    return "\n".join(lines).rstrip() + "\n"


def write_section(doc: Path, name: str, body: str, *, command: str, seconds: float) -> None:
    """Replaces the section between this size's markers in `doc` (appending it if new)."""
    begin, end = f"<!-- faults:{name} -->", f"<!-- /faults:{name} -->"
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    cores = os.cpu_count() or 0
    header = (
        f"Measured {when} on {cores} cores ({platform.machine()}, Python "
        f"{platform.python_version()}, {platform.system()}) by `{command}`, in {seconds:.0f} s."
    )
    block = f"{begin}\n{header}\n\n{body.strip()}\n{end}"
    text = doc.read_text() if doc.exists() else "# Reliability\n"
    # the markers alone on their lines: the prose may quote them
    pattern = re.compile(f"^{re.escape(begin)}$.*?^{re.escape(end)}$", re.DOTALL | re.MULTILINE)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text)
