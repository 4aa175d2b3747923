"""The JSON Schema validator for user-supplied schemas: linear-time patterns, bounded work.

jsonschema runs `pattern`, `patternProperties` (and the `additionalProperties` that
depends on it) with Python's backtracking `re`, where ``(a+)+$`` against 30 characters
takes minutes and holds the GIL, stalling every thread of the worker. Here they run in
re2, whose matching time is linear in the text. `uniqueItems` is linear too, and every
keyword evaluation spends one step of a per-check budget, so a schema whose `$ref`s
double the work at each level ends in a violation, not a stall.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import re2
from jsonschema import Draft202012Validator, FormatChecker, ValidationError, validators

__all__ = [
    "OverBudget",
    "UserSchemaValidator",
    "pattern_problem",
    "schema_format_checker",
    "step_budget",
]

Keyword = Callable[[Any, Any, Any, dict[str, Any]], Iterable[ValidationError] | None]

_PATTERN_CACHE_SIZE = 512  # compiled patterns kept per process


class OverBudget(Exception):
    """Raised inside a check that has spent its budget of keyword evaluations."""


@dataclass
class _Budget:
    remaining: int


_BUDGET: ContextVar[_Budget | None] = ContextVar("signoff_schema_budget", default=None)


@functools.lru_cache(maxsize=1)
def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is reported to the caller, not to stderr
    return options


@functools.lru_cache(maxsize=_PATTERN_CACHE_SIZE)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern, options=_options())


def pattern_problem(pattern: str) -> str | None:
    """Why re2 cannot compile `pattern` (a backreference, a lookaround, ...); None if it can."""
    try:
        _compiled(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
    return None


def _searcher(pattern: str) -> Callable[[str], bool] | ValidationError:
    problem = pattern_problem(pattern)
    if problem is not None:
        return ValidationError(f"pattern {pattern!r} is not supported (re2): {problem}")
    regex = _compiled(pattern)
    return lambda text: regex.search(text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator:
    if not validator.is_type(instance, "string"):
        return
    search = _searcher(pattern)
    if isinstance(search, ValidationError):
        yield search
    elif not search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        search = _searcher(pattern)
        if isinstance(search, ValidationError):
            yield search
            continue
        for key, value in instance.items():
            if search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _extras(instance: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    """Keys matched neither by `properties` nor by a `patternProperties` pattern."""
    named = schema.get("properties", {})
    searches = [_searcher(p) for p in schema.get("patternProperties", {})]
    usable = [s for s in searches if not isinstance(s, ValidationError)]
    return {
        key for key in instance if key not in named and not any(search(key) for search in usable)
    }


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: dict[str, Any]
) -> Iterator:
    """As jsonschema's, with the patterns of `patternProperties` matched by re2."""
    if not validator.is_type(instance, "object"):
        return
    extras = _extras(instance, schema)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        joined = ", ".join(repr(each) for each in sorted(extras))
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            problem = f"Additional properties are not allowed ({joined} {verb} unexpected)"
            yield ValidationError(problem)


def _canonical(value: Any) -> Any:
    """A hashable form equal exactly when jsonschema's `equal` says so (1 == 1.0, True != 1)."""
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_canonical(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _canonical(item)) for key, item in value.items()))
    return ("string", value) if isinstance(value, str) else ("other", value)


def _unique_items(validator: Any, unique: Any, instance: Any, schema: dict[str, Any]) -> Iterator:
    """As jsonschema's, in linear time: its fallback compares every pair of objects."""
    if not unique or not validator.is_type(instance, "array"):
        return
    try:
        distinct = len({_canonical(item) for item in instance}) == len(instance)
    except TypeError:  # something unhashable that JSON cannot hold; let jsonschema decide
        fallback = Draft202012Validator.VALIDATORS["uniqueItems"]
        yield from fallback(validator, unique, instance, schema) or ()
        return
    if not distinct:
        yield ValidationError(f"{instance!r} has non-unique elements")


def _counted(keyword: Keyword) -> Keyword:
    """The keyword, spending one step of the running check's budget each time it is evaluated."""

    @functools.wraps(keyword)
    def evaluate(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Any:
        budget = _BUDGET.get()
        if budget is not None:
            budget.remaining -= 1
            if budget.remaining < 0:
                raise OverBudget
        return keyword(validator, value, instance, schema)

    return evaluate


@contextmanager
def step_budget(steps: int) -> Iterator[None]:
    """Within the block, a check in this context may evaluate at most `steps` keywords."""
    token = _BUDGET.set(_Budget(steps))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _keywords() -> dict[str, Keyword]:
    overrides: dict[str, Keyword] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
    }
    chosen = {**Draft202012Validator.VALIDATORS, **overrides}
    return {name: _counted(keyword) for name, keyword in chosen.items()}


def _is_re2_pattern(instance: object) -> bool:
    return not isinstance(instance, str) or pattern_problem(instance) is None


def schema_format_checker() -> FormatChecker:
    """Draft 2020-12's format checks, with `regex` meaning "re2 compiles it"."""
    checker = FormatChecker(formats=())
    for name, (check, raises) in Draft202012Validator.FORMAT_CHECKER.checkers.items():
        checker.checks(name, raises)(check)
    checker.checks("regex")(_is_re2_pattern)
    return checker


# A class like Draft202012Validator, not registered for any $schema URI (`version` unset),
# so only code that asks for it by name gets it.
UserSchemaValidator = validators.extend(Draft202012Validator, _keywords())
