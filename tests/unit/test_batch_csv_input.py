"""Batch input from CSV: the column template, and a file checked whole before anything is queued."""

from __future__ import annotations

import io

import pytest

from shared.batches.csv_input import MAX_PROBLEMS, check_csv, csv_items
from shared.batches.template import ColumnTemplate
from shared.errors import InvalidInput
from shared.settings import Settings

TEMPLATE = ColumnTemplate.parse("Classify: {subject}\n{body}")


def source(text: str) -> io.StringIO:
    return io.StringIO(text, newline="")


def items(text: str, template: ColumnTemplate | None = TEMPLATE) -> list[tuple[int, str, str]]:
    layout = check_csv(source(text), template, name="in.csv")
    found = csv_items(source(text), layout, Settings())
    return [(i.line, i.id, i.prompt.text if i.prompt else i.error) for i in found]


def refusal(text: str, template: ColumnTemplate | None = TEMPLATE) -> str:
    with pytest.raises(InvalidInput) as raised:
        check_csv(source(text), template, name="in.csv")
    return str(raised.value)


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("{a.b}", "{a.b}: a column's name only, no attribute or index access"),
        ("{a[0]}", "{a[0]}: a column's name only, no attribute or index access"),
        ("{a.__class__}", "no attribute or index access"),
        ("{}", "{} names no column"),
        ("{0}", "{0} is a position"),
        ("{a!r}", "{a!r}: no format spec or conversion"),
        ("{a:>10}", "{a:>10}: no format spec or conversion"),
        ("{a:{b}}", "no format spec or conversion"),
        ("Classify: {subject", "expected '}'"),
        ("a } b", "Single '}'"),
        ("   ", "must not be empty"),
    ],
)
def test_a_template_names_columns_and_nothing_else(template: str, says: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        ColumnTemplate.parse(template)
    assert says in str(raised.value)


def test_a_template_copies_cells_and_never_evaluates_them() -> None:
    template = ColumnTemplate.parse("{{literal}} {first name}: {x} and {x}")
    assert template.columns == ("first name", "x")
    cells = {"first name": "{x.__class__}", "x": "{0}"}
    assert template.render(cells) == "{literal} {x.__class__}: {0} and {0}"


def test_rows_become_items_with_their_ids_and_rendered_prompts() -> None:
    text = (
        "id,subject,body,unused\r\n"
        't1,Printer,"on fire,\nreally",x\r\n'  # a quoted cell with a comma and a newline
        "\r\n"  # a blank line is skipped
        ",Mouse,lost,y\r\n"  # no id: the line names the item
        "t1,Dup,again,z\r\n"
    )
    assert items(text) == [
        (2, "t1", "Classify: Printer\non fire,\nreally"),
        (5, "line-5", "Classify: Mouse\nlost"),
        (6, "line-6", "line 6: duplicate id 't1'"),
    ]


def test_without_a_template_the_prompt_column_is_the_prompt() -> None:
    assert items("prompt,id\nhello,a\n", None) == [(2, "a", "hello")]
    assert "no 'prompt' column and no template" in refusal("id,text\na,b\n", None)


def test_an_invalid_prompt_is_an_invalid_item_and_the_rest_runs() -> None:
    found = items("subject,body\n,\nok,fine\n", ColumnTemplate.parse("{subject}{body}"))
    assert found[0][0] == 2 and found[0][2].startswith("line 2: ")
    assert found[1] == (3, "line-3", "okfine")


def test_a_column_the_header_lacks_is_refused_naming_line_and_column() -> None:
    said = refusal("id,subject,text\na,b,c\n")
    assert said.startswith("in.csv: line 1: no column 'body', which the template names")
    assert "(the columns: 'id', 'subject', 'text')" in said and "nothing was submitted" in said


def test_rows_with_missing_or_extra_cells_are_refused_naming_each() -> None:
    text = "id,subject,body\na,s,b\nb,s\nc,s,b,extra\nd\n"
    said = refusal(text)
    assert said.startswith("in.csv: 3 problem(s); nothing was submitted:")
    assert "line 3: no value for column 'body' (2 cells; the header has 3)" in said
    assert "line 4: 4 cells; the header has 3" in said
    assert "line 5: no value for column 'subject'" in said


def test_a_refusal_lists_the_first_problems_and_counts_the_rest() -> None:
    text = "subject,body\n" + "only one\n" * (MAX_PROBLEMS + 5)
    said = refusal(text)
    assert said.count("no value for column 'body'") == MAX_PROBLEMS
    assert f"{MAX_PROBLEMS + 5} problem(s)" in said and "and 5 more" in said


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no header row"),
        ("subject,subject,body\n", "line 1: column 'subject' appears twice"),
        ('subject,body\na,"b"c\n', "line 2: not CSV"),
    ],
)
def test_files_that_are_not_a_table_are_refused(text: str, says: str) -> None:
    assert says in refusal(text)
