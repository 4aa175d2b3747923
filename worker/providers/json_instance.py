"""A small, valid instance of a JSON schema: the demo model's structured output and tool arguments.

Pure and deterministic. It honours the keywords structured-output schemas use:
``type`` (a list picks its first non-null type; without ``type`` the kind is
inferred from the other keywords, else a string), ``const``, ``enum`` (first
value), ``anyOf``/``oneOf`` (first branch), ``allOf`` (merged), local ``$ref``
(``#/$defs/...``, ``#/definitions/...``, ``#``), object ``properties`` and
``required`` (every property down to depth 3, required ones only below, and
only required ones when ``all_properties`` is false), ``minProperties``,
``items``/``prefixItems`` with ``minItems``/``maxItems`` (one item when allowed,
down to depth 3) and ``uniqueItems``, ``minLength``/``maxLength``, common
``format`` values, and ``minimum``/``maximum`` (inclusive or exclusive) with
``multipleOf``. ``pattern``, ``not`` and ``contains`` are not honoured (an
optional property with a ``pattern`` is left out).
An unresolvable or non-local ``$ref``, a ``false`` schema, an unknown type or a
schema nesting deeper than 32 levels raises `InvalidInput`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from shared.errors import InvalidInput

__all__ = ["minimal_instance"]

FULL_DEPTH = 3  # below this depth only required properties and minItems items are built
MAX_DEPTH = 32  # deeper than this a schema is taken to recurse without end

Schema = Mapping[str, Any]

_FORMATS: dict[str, str] = {
    "date-time": "2000-01-01T00:00:00Z",
    "date": "2000-01-01",
    "time": "00:00:00Z",
    "email": "demo@example.com",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}

_KIND_HINTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("object", ("properties", "required", "additionalProperties", "minProperties")),
    ("array", ("items", "prefixItems", "minItems", "maxItems", "uniqueItems")),
    ("string", ("minLength", "maxLength", "pattern", "format")),
    ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")),
)


@dataclass(frozen=True)
class _Context:
    root: Schema
    text: str
    all_properties: bool
    depth: int = 0

    def deeper(self) -> _Context:
        if self.depth >= MAX_DEPTH:
            raise InvalidInput(f"schema nests deeper than {MAX_DEPTH} levels; is it recursive?")
        return replace(self, depth=self.depth + 1)

    @property
    def shallow(self) -> bool:
        return self.depth < FULL_DEPTH


def minimal_instance(
    schema: Schema | bool, *, text: str = "demo", all_properties: bool = True
) -> Any:
    """Builds a value valid against `schema`; string fields carry `text` where they can."""
    root: Schema = schema if isinstance(schema, Mapping) else {}
    return _instance(schema, _Context(root=root, text=text, all_properties=all_properties), 0)


def _instance(schema: Schema | bool, ctx: _Context, variant: int) -> Any:
    """`variant` > 0 asks for a value different from variant 0 (items of a uniqueItems array)."""
    flat = _flatten(_as_schema(schema), ctx)
    if "const" in flat:
        return flat["const"]
    if flat.get("enum"):
        return flat["enum"][variant % len(flat["enum"])]
    kind = _kind(flat)
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise InvalidInput(f"schema has unknown type {kind!r}")
    return builder(flat, ctx, variant)


def _as_schema(schema: Schema | bool) -> Schema:
    if schema is False:
        raise InvalidInput("schema `false` admits no value")
    return schema if isinstance(schema, Mapping) else {}


def _flatten(schema: Schema, ctx: _Context) -> Schema:
    """Resolves $ref and folds anyOf/oneOf (first branch) and allOf into one schema."""
    schema = _resolve(schema, ctx)
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            rest = {k: v for k, v in schema.items() if k != key}
            return _flatten(_merge(rest, _as_schema(schema[key][0])), ctx.deeper())
    if schema.get("allOf"):
        merged: Schema = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            merged = _merge(merged, _flatten(_as_schema(part), ctx.deeper()))
        return _flatten(merged, ctx.deeper())
    return schema


def _resolve(schema: Schema, ctx: _Context) -> Schema:
    hops = 0
    while "$ref" in schema:
        hops += 1
        if hops > MAX_DEPTH:
            raise InvalidInput(f"$ref {schema['$ref']!r} does not resolve to a schema")
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        schema = _merge(_lookup(ctx.root, str(schema["$ref"])), rest)
    return schema


def _lookup(root: Schema, ref: str) -> Schema:
    if not ref.startswith("#"):
        raise InvalidInput(f"unsupported $ref {ref!r}: only local references (#/...) are supported")
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or key not in node:
            raise InvalidInput(f"$ref {ref!r} points to nothing")
        node = node[key]
    return _as_schema(node)


def _merge(base: Schema, extra: Schema) -> Schema:
    """Later keywords win, except that properties and required accumulate."""
    merged = {**base, **extra}
    if "properties" in base and "properties" in extra:
        merged["properties"] = {**base["properties"], **extra["properties"]}
    if "required" in base or "required" in extra:
        merged["required"] = list(
            dict.fromkeys([*base.get("required", []), *extra.get("required", [])])
        )
    return merged


def _kind(schema: Schema) -> str:
    declared = schema.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if t != "null"), "null" if declared else None)
    if declared:
        return str(declared)
    return next((kind for kind, keys in _KIND_HINTS if any(k in schema for k in keys)), "string")


def _object(schema: Schema, ctx: _Context, variant: int) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties", {})
    inner = ctx.deeper()
    return {
        name: _instance(properties.get(name, extra), inner, variant)
        for name in _property_names(schema, ctx)
    }


def _property_names(schema: Schema, ctx: _Context) -> list[str]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    required: list[str] = list(schema.get("required", []))
    everything = ctx.all_properties and ctx.shallow
    names = [p for p in properties if p in required or (everything and _optional_ok(properties[p]))]
    names += [r for r in required if r not in names]
    wanted = schema.get("minProperties", 0)
    names += [p for p in properties if p not in names][: max(wanted - len(names), 0)]
    names += [f"field{i}" for i in range(max(wanted - len(names), 0))]
    return names


def _optional_ok(schema: Any) -> bool:
    """An optional property is left out when its pattern could not be honoured."""
    return not (isinstance(schema, Mapping) and "pattern" in schema)


def _array(schema: Schema, ctx: _Context, variant: int) -> list[Any]:
    items = schema.get("items", {})
    prefix: list[Any] = schema.get("prefixItems") or (items if isinstance(items, list) else [])
    rest = schema.get("additionalItems", {}) if isinstance(items, list) else items
    unique = bool(schema.get("uniqueItems"))
    inner = ctx.deeper()
    return [
        _instance(prefix[i] if i < len(prefix) else rest, inner, variant + i if unique else variant)
        for i in range(_item_count(schema, ctx, len(prefix)))
    ]


def _item_count(schema: Schema, ctx: _Context, prefix_length: int) -> int:
    wanted = max(prefix_length, 1 if ctx.shallow else 0)
    if "maxItems" in schema:
        wanted = min(wanted, int(schema["maxItems"]))
    return max(wanted, int(schema.get("minItems", 0)))


def _string(schema: Schema, ctx: _Context, variant: int) -> str:
    if schema.get("format") in _FORMATS:
        return _FORMATS[schema["format"]]
    suffix = f" {variant}" if variant else ""
    value = ctx.text + suffix
    if "maxLength" in schema:
        limit = int(schema["maxLength"])
        value = (ctx.text[: max(limit - len(suffix), 0)] + suffix)[:limit]
    return value.ljust(int(schema.get("minLength", 0)), ".")


def _edge(schema: Schema, inclusive_key: str, exclusive_key: str) -> tuple[float | None, bool]:
    """One bound as (value, exclusive?); draft-4 boolean exclusivity is understood."""
    inclusive = schema.get(inclusive_key)
    exclusive = schema.get(exclusive_key)
    if isinstance(exclusive, bool):
        inclusive, exclusive = (None, inclusive) if exclusive else (inclusive, None)
    if exclusive is None:
        return inclusive, False
    if inclusive is None:
        return exclusive, True
    tighter = exclusive >= inclusive if inclusive_key == "minimum" else exclusive <= inclusive
    return (exclusive, True) if tighter else (inclusive, False)


def _number(schema: Schema, ctx: _Context, variant: int) -> float:
    low, low_open = _edge(schema, "minimum", "exclusiveMinimum")
    high, high_open = _edge(schema, "maximum", "exclusiveMaximum")
    if low is None:
        value = 0.0 if high is None else min(0.0, high - 1 if high_open else high)
    elif high is None or not low_open:
        value = low + 1 if low_open else low
    else:
        value = (low + high) / 2
    return _step(schema, value + variant * schema.get("multipleOf", 1), upward=low is not None)


def _integer(schema: Schema, ctx: _Context, variant: int) -> int:
    low, low_open = _edge(schema, "minimum", "exclusiveMinimum")
    high, high_open = _edge(schema, "maximum", "exclusiveMaximum")
    if low is not None:
        value = math.floor(low) + 1 if low_open else math.ceil(low)
    elif high is not None:
        value = min(0, math.ceil(high) - 1 if high_open else math.floor(high))
    else:
        value = 0
    return int(_step(schema, value, upward=low is not None)) + variant * int(
        schema.get("multipleOf", 1)
    )


def _step(schema: Schema, value: float, *, upward: bool) -> float:
    """Rounds to multipleOf, away from the bound that was given."""
    step = schema.get("multipleOf")
    rounded = (math.ceil if upward else math.floor)(value / step) * step if step else value
    return int(rounded) if float(rounded).is_integer() else rounded


def _boolean(schema: Schema, ctx: _Context, variant: int) -> bool:
    return variant % 2 == 1


def _null(schema: Schema, ctx: _Context, variant: int) -> None:
    return None


_BUILDERS: dict[str, Callable[[Schema, _Context, int], Any]] = {
    "object": _object,
    "array": _array,
    "string": _string,
    "number": _number,
    "integer": _integer,
    "boolean": _boolean,
    "null": _null,
}
