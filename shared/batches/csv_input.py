"""Batch input from CSV: a header row, then one item per row, its prompt a template of cells.

The header names the columns; an `id` column, if there is one, gives each item its id.
The prompt is the template rendered with the row's cells, or, without a template, the
`prompt` column. A file is read twice, each time a record at a time (bounded memory):
`check_csv` reads it whole and refuses it, naming the line and the column, when the template
names a column the header lacks or a row has fewer or more cells than the header, so nothing
is queued from a file with such a problem; `csv_items` then turns each row into a batch
line. A prompt the checks of every prompt refuse becomes an `invalid` item, as in a JSONL
file, and the rest runs. Line numbers are the file's: a record that spans lines (a quoted
cell with a newline) is named by its first.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from shared.batches.lines import BatchLine
from shared.batches.template import ColumnTemplate
from shared.errors import InvalidInput, SignoffError
from shared.settings import Settings
from shared.validation import validate_prompt

__all__ = ["ID_COLUMN", "MAX_PROBLEMS", "PROMPT_COLUMN", "CsvLayout", "check_csv", "csv_items"]

ID_COLUMN = "id"
PROMPT_COLUMN = "prompt"
MAX_PROBLEMS = 20  # named in the refusal; a count says how many more there were

Record = tuple[int, list[str]]  # the line a record starts on, and its cells


@dataclass(frozen=True)
class CsvLayout:
    """The header's columns and the template that makes a row's prompt."""

    columns: tuple[str, ...]
    template: ColumnTemplate

    @classmethod
    def of(cls, line: int, header: list[str], template: ColumnTemplate | None) -> CsvLayout:
        """The layout, or InvalidInput naming the header's line and the column that is wrong."""
        seen: set[str] = set()
        for name in header:
            if name in seen:
                raise InvalidInput(f"line {line}: column {name!r} appears twice in the header")
            seen.add(name)
        if template is None:
            if PROMPT_COLUMN not in seen:
                raise InvalidInput(
                    f"line {line}: no {PROMPT_COLUMN!r} column and no template naming columns "
                    f"(the columns: {_listed(header)})"
                )
            template = ColumnTemplate.parse("{" + PROMPT_COLUMN + "}")
        for name in template.columns:
            if name not in seen:
                raise InvalidInput(
                    f"line {line}: no column {name!r}, which the template names "
                    f"(the columns: {_listed(header)})"
                )
        return cls(tuple(header), template)

    def problem(self, line: int, cells: list[str]) -> str:
        """What is wrong with a row's shape ("" when nothing is)."""
        if len(cells) < len(self.columns):
            missing = self.columns[len(cells)]
            return (
                f"line {line}: no value for column {missing!r} ({len(cells)} cells; the header "
                f"has {len(self.columns)})"
            )
        if len(cells) > len(self.columns):
            return (
                f"line {line}: {len(cells)} cells; the header has {len(self.columns)} (a cell "
                "holding a comma must be in double quotes)"
            )
        return ""

    def item(self, line: int, cells: list[str], settings: Settings) -> BatchLine:
        """One row as a batch line: its id, and its prompt or why it is invalid."""
        row = dict(zip(self.columns, cells, strict=True))
        item_id = row.get(ID_COLUMN) or f"line-{line}"
        try:
            prompt = validate_prompt(self.template.render(row), settings)
        except SignoffError as exc:
            return BatchLine(line, item_id, error=f"line {line}: {exc}")
        return BatchLine(line, item_id, prompt=prompt)


def check_csv(source: Iterable[str], template: ColumnTemplate | None, *, name: str) -> CsvLayout:
    """Reads the whole file; InvalidInput naming each problem (up to MAX_PROBLEMS), or its layout.

    `name` says what is refused (a path, `csv`), before "nothing was submitted".
    """
    records = _records(source)
    try:
        layout = CsvLayout.of(*_header(records), template)
    except InvalidInput as exc:
        raise InvalidInput(f"{name}: {exc}; nothing was submitted") from None
    problems: list[str] = []
    count = 0
    try:
        for line, cells in records:
            problem = layout.problem(line, cells)
            count += bool(problem)
            if problem and len(problems) < MAX_PROBLEMS:
                problems.append(problem)
    except InvalidInput as exc:  # not CSV from there on: nothing after it can be read
        count += 1
        problems.append(str(exc))
    if problems:
        more = f"\n  and {count - len(problems)} more" if count > len(problems) else ""
        listed = "\n  ".join(problems)
        raise InvalidInput(f"{name}: {count} problem(s); nothing was submitted:\n  {listed}{more}")
    return layout


def csv_items(source: Iterable[str], layout: CsvLayout, settings: Settings) -> Iterator[BatchLine]:
    """Each row of a file `check_csv` accepted, as a batch line, read lazily; a repeated id
    makes the later row invalid."""
    records = _records(source)
    next(records, None)  # the header
    seen: set[str] = set()
    for line, cells in records:
        item = layout.item(line, cells, settings)
        if item.id in seen and not item.error:
            item = BatchLine(line, f"line-{line}", error=f"line {line}: duplicate id {item.id!r}")
        seen.add(item.id)
        yield item


def _header(records: Iterator[Record]) -> Record:
    first = next(records, None)
    if first is None:
        raise InvalidInput("no header row (the file is empty)")
    return first


def _records(source: Iterable[str]) -> Iterator[Record]:
    """Each record with the line it starts on; blank lines are skipped."""
    reader = csv.reader(source, strict=True)
    line = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InvalidInput(f"line {line}: not CSV ({exc})") from None
        if cells:
            yield line, cells
        line = reader.line_num + 1


def _listed(header: list[str]) -> str:
    return ", ".join(map(repr, header)) if header else "none"
