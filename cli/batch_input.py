"""A batch file as items: JSONL (an object per line) or CSV (a header, a template of columns).

A CSV file is checked whole before anything is queued (`shared.batches.csv_input`); both are
then read lazily, so a file of any size takes bounded memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from enum import Enum
from pathlib import Path
from typing import TextIO

import click

from shared.batches.csv_input import CsvLayout, check_csv, csv_items
from shared.batches.lines import BatchLine, parse_line
from shared.batches.template import ColumnTemplate
from shared.errors import InvalidInput
from shared.settings import Settings

__all__ = ["BatchFile", "InputFormat", "read_template"]

_ESCAPE = re.compile(r"\\(.)")
_ESCAPED = {"n": "\n", "t": "\t", "\\": "\\"}


class InputFormat(str, Enum):
    JSONL = "jsonl"
    CSV = "csv"

    @classmethod
    def of(cls, path: Path, chosen: str | None) -> InputFormat:
        """The format chosen, else a `.csv` file's, else JSONL."""
        if chosen is not None:
            return cls(chosen)
        return cls.CSV if path.suffix.lower() == ".csv" else cls.JSONL


def read_template(raw: str) -> ColumnTemplate:
    """`--template`: the text, with \\n, \\t and \\\\ read as a shell cannot type them, or
    `@path` for a file's text as it is."""
    if raw.startswith("@"):
        try:
            text = Path(raw[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            problem = f"cannot read {raw[1:]}: {exc.strerror or exc}"
            raise click.BadParameter(problem, param_hint="--template") from None
    else:
        text = _ESCAPE.sub(lambda m: _ESCAPED.get(m[1], m[0]), raw)
    return ColumnTemplate.parse(text)


class BatchFile:
    """One input file: checked when made (CSV), read as batch lines as often as asked."""

    def __init__(self, path: Path, fmt: InputFormat, template: ColumnTemplate | None) -> None:
        if template is not None and fmt is not InputFormat.CSV:
            raise InvalidInput(
                f"--template names CSV columns, and {path} is read as JSONL "
                "(a .csv file, or --input-format csv)"
            )
        self.path = path
        self.csv = fmt is InputFormat.CSV
        self.layout: CsvLayout | None = None
        if self.csv:
            with self._open() as source:
                self.layout = check_csv(source, template, name=str(path))

    def lines(self, settings: Settings) -> Iterator[BatchLine]:
        """Its items, read lazily; a repeated id makes the later item invalid."""
        with self._open() as source:
            if self.layout is not None:
                yield from csv_items(source, self.layout, settings)
            else:
                yield from _unique(_jsonl(source, settings))

    def _open(self) -> TextIO:
        """CSV with its line ends kept for the csv module (a quoted cell may hold one)."""
        newline = "" if self.csv else None
        return self.path.open(encoding="utf-8-sig", errors="replace", newline=newline)


def _jsonl(source: Iterable[str], settings: Settings) -> Iterator[BatchLine]:
    for number, raw in enumerate(source, start=1):
        line = parse_line(number, raw, settings)
        if line is not None:
            yield line


def _unique(lines: Iterable[BatchLine]) -> Iterator[BatchLine]:
    seen: set[str] = set()
    for line in lines:
        if line.id in seen and not line.error:
            line = BatchLine(
                line.line, f"line-{line.line}", error=f"line {line.line}: duplicate id {line.id!r}"
            )
        seen.add(line.id)
        yield line
