"""The bounds a user-supplied JSON schema must keep, checked once when the schema enters.

A schema comes from an API caller (a conversation's or a batch's response schema) or
from a model (the answer schema of an `ask_operator` question), and it is later
checked against answers inside a worker, next to other conversations. So it must be
small, shallow, have few and short patterns that re2 can compile, refer only inside
itself (`$ref` to ``#...``), and not multiply itself through `$ref`s. Each refusal is
an `InvalidInput` naming the schema field, the JSON path and the limit. Pure: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from shared.errors import InvalidInput
from shared.schema.validator import pattern_problem

__all__ = [
    "MAX_PATTERN_CHARS",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_EXPANSION",
    "MAX_SCHEMA_PATTERNS",
    "MAX_VALIDATION_STEPS",
    "check_bounds",
]

MAX_SCHEMA_BYTES = 64 * 1024  # the schema as compact UTF-8 JSON
MAX_SCHEMA_DEPTH = 32  # JSON objects and arrays nested in one another, the schema itself is 1
MAX_PATTERN_CHARS = 1_000  # one `pattern` value or `patternProperties` key
MAX_SCHEMA_PATTERNS = 100  # `pattern` values and `patternProperties` keys in one schema
MAX_SCHEMA_EXPANSION = 20_000  # objects and arrays once each `$ref` is replaced by its target
MAX_VALIDATION_STEPS = 100_000  # keyword evaluations while checking one value (~0.5 s of CPU)

_DIALECTS = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
    }
)
_DATA = frozenset({"const", "enum", "default", "examples"})  # values, never schemas
_NAMED = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})  # name -> schema
_REFUSED = {
    "$dynamicRef": "$dynamicRef is not supported; use $ref",
    "$dynamicAnchor": "$dynamicAnchor is not supported; use $anchor",
}
_NOWHERE = object()


@dataclass
class _Found:
    """What a walk over the schema's subschemas collects."""

    patterns: list[tuple[str, str]] = field(default_factory=list)  # (path, pattern)
    refs: list[tuple[str, str]] = field(default_factory=list)  # (path, $ref)
    anchors: dict[str, Any] = field(default_factory=dict)
    walked: set[int] = field(default_factory=set)
    pattern_properties: str = ""  # path of the first `patternProperties`
    unevaluated_properties: str = ""  # path of the first `unevaluatedProperties`


def _child(path: str, key: str | int) -> str:
    """A JSON path written as jsonschema writes `json_path` in its errors."""
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"


def _size_bytes(schema: Any, name: str) -> int:
    try:
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise InvalidInput(_too_deep(name)) from None
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{name} is not JSON: {exc}") from exc
    return len(text.encode())


def _too_deep(name: str) -> str:
    return (
        f"{name} nests objects and arrays more than {MAX_SCHEMA_DEPTH} deep "
        "(MAX_SCHEMA_DEPTH); move repeated parts to $defs"
    )


def _check_depth(schema: Any, name: str) -> None:
    """Iterative, so that the check itself cannot overflow the stack."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_SCHEMA_DEPTH:
                    raise InvalidInput(_too_deep(name))
                stack.append((child, depth + 1))


def _walk(node: Any, path: str, found: _Found, name: str, *, root: bool = False) -> None:
    """Collects patterns, refs and anchors from every place a subschema may stand."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            _walk(item, _child(path, index), found, name)
        return
    if not isinstance(node, dict) or id(node) in found.walked:
        return
    found.walked.add(id(node))
    anchor = node.get("$anchor")
    if isinstance(anchor, str):
        found.anchors.setdefault(anchor, node)
    for key, value in node.items():
        if key not in _DATA:
            _keyword(key, value, _child(path, key), found, name, root=root)


def _keyword(key: str, value: Any, where: str, found: _Found, name: str, *, root: bool) -> None:
    if key in _REFUSED:
        raise InvalidInput(f"{name}: {_REFUSED[key]} (at {where})")
    if key in ("$schema", "$id"):
        _check_root_keyword(key, value, where, name, root=root)
    elif key == "$ref" and isinstance(value, str):
        found.refs.append((where, value))
    elif key == "pattern" and isinstance(value, str):
        found.patterns.append((where, value))
    elif key == "patternProperties" and isinstance(value, dict):
        found.pattern_properties = found.pattern_properties or where
        found.patterns.extend((_child(where, pattern), pattern) for pattern in value)
        for pattern, subschema in value.items():
            _walk(subschema, _child(where, pattern), found, name)
    elif key in _NAMED and isinstance(value, dict):
        for each, subschema in value.items():
            _walk(subschema, _child(where, each), found, name)
    else:
        if key == "unevaluatedProperties":
            found.unevaluated_properties = found.unevaluated_properties or where
        _walk(value, where, found, name)


def _check_root_keyword(key: str, value: Any, where: str, name: str, *, root: bool) -> None:
    """`$schema` and `$id` only at the top: elsewhere they would switch dialect or base URI."""
    if not root:
        raise InvalidInput(f"{name}: {key} is only allowed at the top of the schema (at {where})")
    if key == "$schema" and value not in _DIALECTS:
        raise InvalidInput(
            f"{name}: $schema must be https://json-schema.org/draft/2020-12/schema (at {where})"
        )


def _resolve(schema: Any, ref: str, anchors: dict[str, Any]) -> Any:
    """Where a local `$ref` (``#``, ``#/json/pointer``, ``#anchor``) lands, as jsonschema
    finds it; `_NOWHERE` when it lands nowhere."""
    if ref in ("", "#"):
        return schema
    if not ref.startswith("#"):
        return _NOWHERE
    fragment = ref[1:]
    if not fragment.startswith("/"):
        return anchors.get(fragment, _NOWHERE)
    node = schema
    for segment in unquote(fragment[1:]).split("/"):
        token = segment.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _NOWHERE
    return node


def _follow_refs(schema: Any, found: _Found, name: str) -> None:
    """Every `$ref` must land on a schema in this document; what it lands on is walked too."""
    index = 0
    while index < len(found.refs):  # walking a target may find more refs
        where, ref = found.refs[index]
        index += 1
        if not (ref == "" or ref.startswith("#")):
            raise InvalidInput(
                f"{name}: $ref {ref!r} at {where} is not inside the schema; "
                "only local references such as '#/$defs/name' are supported"
            )
        target = _resolve(schema, ref, found.anchors)
        if target is _NOWHERE:
            raise InvalidInput(f"{name}: $ref {ref!r} at {where} points to nothing")
        if not isinstance(target, dict | bool):
            raise InvalidInput(f"{name}: $ref {ref!r} at {where} does not point to a schema")
        _walk(target, f"{where}->{ref}", found, name)


def _check_patterns(found: _Found, name: str) -> None:
    if len(found.patterns) > MAX_SCHEMA_PATTERNS:
        raise InvalidInput(
            f"{name} has {len(found.patterns)} patterns; the limit is {MAX_SCHEMA_PATTERNS} "
            "(MAX_SCHEMA_PATTERNS)"
        )
    for where, pattern in found.patterns:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise InvalidInput(
                f"{name}: the pattern at {where} is {len(pattern):,} characters; the limit is "
                f"{MAX_PATTERN_CHARS:,} (MAX_PATTERN_CHARS)"
            )
        problem = pattern_problem(pattern)
        if problem is not None:
            raise InvalidInput(
                f"{name}: the pattern at {where} is not supported ({problem}); patterns run in "
                "re2, which has no backreferences or lookaround"
            )
    if found.pattern_properties and found.unevaluated_properties:
        raise InvalidInput(
            f"{name}: unevaluatedProperties (at {found.unevaluated_properties}) cannot be "
            f"combined with patternProperties (at {found.pattern_properties})"
        )


def _children(node: Any, schema: Any, anchors: dict[str, Any]) -> list[Any]:
    if isinstance(node, list):
        return node
    children = list(node.values())
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _resolve(schema, ref, anchors)
        if target is not _NOWHERE:
            children.append(target)
    return children


def _check_expansion(schema: Any, found: _Found, name: str) -> None:
    """Counts objects and arrays with every `$ref` replaced by its target, and stops at the
    limit. A `$ref` back to an enclosing schema (recursion) counts once: the value being
    checked bounds how deep it goes, and the step budget bounds the work."""
    sizes: dict[int, int] = {}
    active = {id(schema)}
    frames: list[tuple[Any, Any, list[int]]] = [
        (schema, iter(_children(schema, schema, found.anchors)), [1])
    ]
    while frames:
        node, pending, total = frames[-1]
        child = next(pending, _NOWHERE)
        if child is _NOWHERE:
            frames.pop()
            active.discard(id(node))
            sizes[id(node)] = total[0]
            if frames:
                frames[-1][2][0] += total[0]
        elif isinstance(child, dict | list) and id(child) not in active:
            if id(child) in sizes:
                total[0] += sizes[id(child)]
            else:
                active.add(id(child))
                frames.append((child, iter(_children(child, schema, found.anchors)), [1]))
        if frames and frames[-1][2][0] > MAX_SCHEMA_EXPANSION:
            raise InvalidInput(
                f"{name} grows past {MAX_SCHEMA_EXPANSION:,} objects and arrays when its $refs "
                "are expanded (MAX_SCHEMA_EXPANSION); a $ref used many times over must be smaller"
            )


def check_bounds(schema: Any, *, name: str) -> None:
    """Raises InvalidInput, naming the field `name` and the limit, for a schema out of bounds."""
    size = _size_bytes(schema, name)
    if size > MAX_SCHEMA_BYTES:
        raise InvalidInput(
            f"{name} is {size:,} bytes as JSON; the limit is {MAX_SCHEMA_BYTES:,} "
            "(MAX_SCHEMA_BYTES)"
        )
    if isinstance(schema, dict | list):
        _check_depth(schema, name)
    found = _Found()
    _walk(schema, "$", found, name, root=True)
    _follow_refs(schema, found, name)
    _check_patterns(found, name)
    _check_expansion(schema, found, name)
