"""User-supplied JSON schemas: re2 patterns, the bounds checked at creation, bounded checks.

Bounded means in CPU time (`time.process_time`): what runs beside the suite cannot make a
linear check look slow, and an exponential one still takes far longer than the bound.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import shared.schema
import shared.schema.limits
import shared.schema.validator
from shared.errors import InvalidInput
from shared.schema import (
    MAX_PATTERN_CHARS,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_PATTERNS,
    check_schema,
    schema_violations,
)
from worker.tools.ask_operator import DEFAULT_ANSWER_SCHEMA, question_problem

EVIL = {
    "type": "object",
    "properties": {"a": {"type": "string", "pattern": "(a+)+$"}},
    "required": ["a"],
}


def refused(schema: Any, *, name: str = "response_schema") -> str:
    with pytest.raises(InvalidInput) as problem:
        check_schema(schema, name=name)
    return problem.value.message


def nested(levels: int) -> dict[str, Any]:
    """A schema nesting `levels` JSON objects: {"not": {"not": ... {}}}."""
    schema: dict[str, Any] = {}
    for _ in range(levels - 1):
        schema = {"not": schema}
    return schema


def doubling(levels: int) -> dict[str, Any]:
    """Each of `levels` $defs refers twice to the next: small, and 2**levels subschemas."""
    defs: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "string"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


@pytest.mark.parametrize("module", [shared.schema, shared.schema.limits, shared.schema.validator])
def test_declared_names_exist(module: Any) -> None:
    assert module.__all__ and all(hasattr(module, name) for name in module.__all__)


def test_the_evil_pattern_is_accepted_and_checks_in_linear_time() -> None:
    assert check_schema(EVIL) is EVIL
    near_miss = {"a": "a" * 28 + "!"}  # Python's re takes tens of seconds on this
    started = time.process_time()
    problems = schema_violations(near_miss, EVIL)
    assert time.process_time() - started < 1.0
    assert problems == [f"$.a: {near_miss['a']!r} does not match '(a+)+$'"]
    long_miss = {"a": "a" * 50_000 + "!"}
    started = time.process_time()
    assert len(schema_violations(long_miss, EVIL)) == 1
    assert time.process_time() - started < 1.0


def test_re2_patterns_keep_their_meaning() -> None:
    schema = {"properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"}}}
    assert schema_violations({"code": "ABC-12"}, schema) == []
    assert schema_violations({"code": "xABC-12"}, schema) == [
        "$.code: 'xABC-12' does not match '^[A-Z]{3}-\\\\d+$'"
    ]
    unanchored = {"pattern": "b+"}  # a search, as in JSON Schema: anywhere in the string
    assert schema_violations("abbc", unanchored) == []
    assert schema_violations("ac", unanchored) == ["$: 'ac' does not match 'b+'"]
    assert schema_violations(5, unanchored) == []  # not a string: pattern does not apply


def test_unicode_classes_that_python_re_lacks_are_accepted() -> None:
    schema = {"pattern": "^\\p{Lu}\\p{Ll}+$"}
    check_schema(schema)
    assert schema_violations("Émile", schema) == []
    assert len(schema_violations("émile", schema)) == 1


def test_pattern_properties_and_additional_properties_use_re2() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^x-": {"type": "integer"}, "(a+)+$": {"type": "string"}},
        "additionalProperties": False,
    }
    check_schema(schema)
    assert schema_violations({"x-one": 1, "baa": "s"}, schema) == []
    assert schema_violations({"x-one": "1"}, schema) == ["$['x-one']: '1' is not of type 'integer'"]
    near_miss = "a" * 28 + "!"
    started = time.process_time()
    problems = schema_violations({near_miss: 1}, schema)
    assert time.process_time() - started < 1.0
    assert problems == [f"$: {near_miss!r} does not match any of the regexes: '(a+)+$', '^x-'"]


def test_additional_properties_without_patterns_reads_as_jsonschema_writes_it() -> None:
    schema = {"properties": {"a": {}}, "additionalProperties": False}
    assert schema_violations({"a": 1, "b": 2, "c": 3}, schema) == [
        "$: Additional properties are not allowed ('b', 'c' were unexpected)"
    ]
    assert schema_violations({"b": 2}, {"additionalProperties": {"type": "string"}}) == [
        "$.b: 2 is not of type 'string'"
    ]


@pytest.mark.parametrize(
    ("schema", "where", "why"),
    [
        ({"properties": {"a": {"pattern": "(a)\\1"}}}, "$.properties.a.pattern", "\\1"),
        ({"patternProperties": {"^(?=x)": {}}}, "$.patternProperties.^(?=x)", "(?="),
        ({"items": {"pattern": "(?<!a)b"}}, "$.items.pattern", "(?<"),
        ({"$defs": {"d": {"propertyNames": {"pattern": "\\Z(?!"}}}}, "$.$defs.d", "pattern"),
    ],
)
def test_a_pattern_re2_cannot_compile_is_refused_with_its_path(
    schema: dict[str, Any], where: str, why: str
) -> None:
    message = refused(schema)
    assert message.startswith(f"response_schema: the pattern at {where}")
    assert why in message and "re2" in message


def test_the_size_bound() -> None:
    filler = "x" * (MAX_SCHEMA_BYTES - len('{"description":""}'))
    check_schema({"description": filler})
    message = refused({"description": filler + "x"})
    assert f"is {MAX_SCHEMA_BYTES + 1:,} bytes" in message and "MAX_SCHEMA_BYTES" in message


def test_the_size_counts_utf8_bytes() -> None:
    message = refused({"description": "é" * (MAX_SCHEMA_BYTES // 2)})
    assert "MAX_SCHEMA_BYTES" in message


def test_the_depth_bound() -> None:
    check_schema(nested(MAX_SCHEMA_DEPTH))
    message = refused(nested(MAX_SCHEMA_DEPTH + 1))
    assert message.startswith("response_schema nests") and "MAX_SCHEMA_DEPTH" in message


def test_a_schema_too_deep_for_json_itself_is_refused_not_crashed() -> None:
    assert "MAX_SCHEMA_DEPTH" in refused(nested(5_000))


def test_the_pattern_length_bound() -> None:
    check_schema({"pattern": "a" * MAX_PATTERN_CHARS})
    message = refused({"properties": {"p": {"pattern": "a" * (MAX_PATTERN_CHARS + 1)}}})
    assert "the pattern at $.properties.p.pattern is 1,001 characters" in message
    assert "MAX_PATTERN_CHARS" in message


def test_the_pattern_count_bound() -> None:
    def with_patterns(count: int) -> dict[str, Any]:
        return {"properties": {f"p{i}": {"pattern": f"^{i}$"} for i in range(count)}}

    check_schema(with_patterns(MAX_SCHEMA_PATTERNS))
    message = refused(with_patterns(MAX_SCHEMA_PATTERNS + 1))
    assert f"has {MAX_SCHEMA_PATTERNS + 1} patterns" in message
    assert "MAX_SCHEMA_PATTERNS" in message


def test_pattern_property_keys_count_as_patterns() -> None:
    keys = {f"^k{i}$": {} for i in range(MAX_SCHEMA_PATTERNS + 1)}
    assert "MAX_SCHEMA_PATTERNS" in refused({"patternProperties": keys})


def test_values_are_not_read_as_schemas() -> None:
    schema = {
        "enum": [{"pattern": "(a)\\1"}],
        "const": {"$schema": "anything"},
        "properties": {"pattern": {"type": "string"}, "$schema": {"type": "string"}},
    }
    check_schema(schema)


def test_refs_that_multiply_the_schema_are_refused_at_once() -> None:
    check_schema(doubling(10))
    schema = doubling(30)
    assert len(json.dumps(schema)) < 2_500
    started = time.process_time()
    message = refused(schema)
    assert time.process_time() - started < 1.0
    assert "MAX_SCHEMA_EXPANSION" in message


def test_recursion_through_refs_is_allowed_and_its_checks_are_bounded() -> None:
    tree = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"name": {"type": "string"}, "children": {"items": {"$ref": "#"}}},
    }
    check_schema(tree)
    assert schema_violations({"name": "a", "children": [{"name": "b"}]}, tree) == []
    assert schema_violations({"children": [{"name": 1}]}, tree) == [
        "$.children[0].name: 1 is not of type 'string'"
    ]
    # Each level checks its child twice: 2**40 checks, unless the budget stops it.
    doubling_tree = {
        "$defs": {
            "n": {"type": "object", "properties": {"c": {"allOf": [{"$ref": "#/$defs/n"}] * 2}}}
        },
        "$ref": "#/$defs/n",
    }
    check_schema(doubling_tree)
    value: dict[str, Any] = {}
    for _ in range(40):
        value = {"c": value}
    started = time.process_time()
    [problem] = schema_violations(value, doubling_tree)
    assert time.process_time() - started < 5.0
    assert problem.startswith("$: checking the value") and "MAX_VALIDATION_STEPS" in problem


def test_unique_items_is_linear_and_keeps_jsonschema_equality() -> None:
    schema = {"type": "array", "uniqueItems": True}
    items: list[Any] = [{"id": i, "tags": [i]} for i in range(20_000)]
    started = time.process_time()
    assert schema_violations(items, schema) == []
    assert len(schema_violations([*items, {"tags": [7], "id": 7}], schema)) == 1
    assert time.process_time() - started < 2.0  # pairwise, as jsonschema does it: minutes
    assert schema_violations([1, True, 0, False, [1], [True]], schema) == []
    assert len(schema_violations([1, 1.0], schema)) == 1
    assert len(schema_violations([{"a": [1]}, {"a": [1.0]}], schema)) == 1


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"properties": {"a": {"$schema": "http://json-schema.org/draft-07/schema#"}}},
            "$schema is only allowed at the top of the schema (at $.properties.a.$schema)",
        ),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#"},
            "$schema must be https://json-schema.org/draft/2020-12/schema",
        ),
        ({"items": {"$id": "https://example.com/x"}}, "$id is only allowed at the top"),
        ({"$ref": "https://example.com/schema.json"}, "is not inside the schema"),
        ({"$ref": "#/$defs/missing"}, "$ref '#/$defs/missing' at $.$ref points to nothing"),
        ({"$ref": "#nowhere"}, "points to nothing"),
        ({"$defs": {"n": 5}, "$ref": "#/$defs/n"}, "does not point to a schema"),
        ({"$dynamicRef": "#meta"}, "$dynamicRef is not supported"),
        ({"$dynamicAnchor": "meta"}, "$dynamicAnchor is not supported"),
        (
            {"patternProperties": {"^a": {}}, "unevaluatedProperties": False},
            "unevaluatedProperties (at $.unevaluatedProperties) cannot be combined",
        ),
        ({"type": "strnig"}, "is not a valid JSON schema at $.type"),
        ({"minLength": -1}, "is not a valid JSON schema at $.minLength"),
    ],
)
def test_what_would_escape_the_re2_validator_is_refused(
    schema: dict[str, Any], expected: str
) -> None:
    assert expected in refused(schema)


def test_a_ref_into_values_is_checked_like_any_subschema() -> None:
    # Without the check, the target's $schema would switch jsonschema to Draft 7 and `re`.
    schema = {
        "enum": [{"$schema": "http://json-schema.org/draft-07/schema#", "pattern": "(a+)+$"}],
        "properties": {"a": {"$ref": "#/enum/0"}},
    }
    assert "$schema is only allowed at the top" in refused(schema)


def test_local_refs_and_anchors_resolve() -> None:
    schema = {
        "$id": "https://example.com/order.json",
        "$defs": {"sku": {"$anchor": "sku", "type": "string", "pattern": "^[A-Z]+$"}},
        "properties": {"a": {"$ref": "#sku"}, "b": {"$ref": "#/$defs/sku"}},
        "unevaluatedProperties": False,
    }
    check_schema(schema)
    assert schema_violations({"a": "AB", "b": "CD"}, schema) == []
    assert schema_violations({"a": "ab", "c": 1}, schema) == [
        "$.a: 'ab' does not match '^[A-Z]+$'",
        "$: Unevaluated properties are not allowed ('c' was unexpected)",
    ]


def test_a_schema_stored_before_the_bounds_is_one_violation_not_a_crash() -> None:
    assert schema_violations({"a": "aa"}, {"properties": {"a": {"pattern": "(a)\\1"}}}) == [
        "$: response_schema: the pattern at $.properties.a.pattern is not supported "
        "(invalid escape sequence: \\1); patterns run in re2, which has no backreferences "
        "or lookaround"
    ]
    [problem] = schema_violations({}, doubling(30), name="schema")
    assert problem.startswith("$: schema grows past")


def test_the_name_of_the_field_leads_the_message() -> None:
    assert refused({"type": 5}, name="schema").startswith("schema is not a valid JSON schema")
    assert refused([], name="schema") == "schema must be a JSON object, not list"


def test_ask_operator_questions_with_refused_schemas() -> None:
    assert question_problem({"question": "q"}) is None
    assert question_problem({"question": "q", "schema": DEFAULT_ANSWER_SCHEMA}) is None
    assert question_problem({"question": "q", "schema": EVIL}) is None
    problem = question_problem(
        {"question": "q", "schema": {"properties": {"a": {"pattern": "(?=a)"}}}}
    )
    assert problem is not None and problem.startswith("schema: the pattern at $.properties.a")
    assert "MAX_SCHEMA_DEPTH" in (question_problem({"schema": nested(40)}) or "")
