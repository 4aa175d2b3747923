"""Query parameters and request bodies, read strictly: a bad one is a 400 or 422 naming it.

An operation's query is a pydantic model (`QueryModel`, the models are in `webui.queries`):
each field declares one parameter once, its type, bounds and description, and from the
fields come both the OpenAPI parameters (`parameters()`) and the values (`read()`). They
are read as the document says: ``?name=`` is unset (`allowEmptyValue`) unless the field is
`EMPTY_IS_A_VALUE`, a repeated parameter counts once (its first value), others are ignored.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from datetime import date
from enum import Enum
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, Protocol, Self, TypeVar, Union, get_args, get_origin

from flask import request
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)
from pydantic.fields import FieldInfo

from webui.errors import HttpProblem, invalid_body
from webui.stream_ids import STREAM_ID_PATTERN

__all__ = [
    "AN_ID",
    "EMPTY_IS_A_VALUE",
    "HEADER",
    "STRIPPED",
    "ChoiceParam",
    "DayParam",
    "IntegerParam",
    "NumberParam",
    "QueryModel",
    "Refusal",
    "Sent",
    "Source",
    "StreamIdParam",
    "json_body",
]

M = TypeVar("M", bound=BaseModel)
E = TypeVar("E", bound=Enum)

# Matched whole, ASCII only: Python's int() and float() also take "1_000", " 5", "inf", "0x10"
# and digits of other scripts. A number is a JSON number (``2.5``, ``1e-05``).
_INTEGER = re.compile(r"-?[0-9]{1,30}")
_NUMBER = re.compile(r"-?[0-9]{1,30}(?:\.[0-9]{1,30})?(?:[eE][-+]?[0-9]{1,4})?")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# Words of a schema the document shows the reader, not the parameter.
_NOT_SCHEMA = ("title", "description")


class Source(Protocol):
    """Where parameters are read from: a query string, a form, headers (or a dict)."""

    def get(self, key: str) -> str | None: ...


@dataclass(frozen=True)
class Refusal:
    """What a 400 says a parameter must be; ``{minimum}``, ``{choices}``... are its schema's."""

    text: str


@dataclass(frozen=True)
class Sent:
    """How a parameter is sent, when not as a plain query parameter (`Annotated` metadata)."""

    located: Literal["query", "header"] = "query"
    empty_is_unset: bool = True  # ``?name=`` reads as unset: HTML forms send empty fields
    strip: bool = False  # surrounding whitespace is dropped first, so a blank one is unset


HEADER = Sent(located="header")
EMPTY_IS_A_VALUE = Sent(empty_is_unset=False)
STRIPPED = Sent(strip=True)
AN_ID = Refusal("must be an id like 1700000000000-0")


def _integer(raw: object) -> object:
    if isinstance(raw, str):
        if not _INTEGER.fullmatch(raw):
            raise ValueError("not an integer in plain digits")
        return int(raw)
    return raw


def _number(raw: object) -> object:
    if isinstance(raw, str):
        value = float(raw) if _NUMBER.fullmatch(raw) else math.nan
        if not math.isfinite(value):
            raise ValueError("not a finite JSON number")
        return value
    return raw


def _day(raw: object) -> object:
    if isinstance(raw, str):
        if not _DAY.fullmatch(raw):
            raise ValueError("not a day like 2025-01-31")
        return date.fromisoformat(raw)  # 2025-02-30 raises ValueError too
    return raw


# The types of parameters, each read strictly and refused in words.
IntegerParam = Annotated[
    int, BeforeValidator(_integer), Refusal("must be an integer from {minimum} to {maximum}")
]
NumberParam = Annotated[
    float,
    BeforeValidator(_number),
    Refusal("must be a number from {minimum} to {maximum}, like 60 or 2.5"),
]
DayParam = Annotated[date, BeforeValidator(_day), Refusal("must be a date like 2025-01-31")]
StreamIdParam = Annotated[str, Field(pattern=STREAM_ID_PATTERN), AN_ID]
ChoiceParam = Annotated[E, Refusal("must be one of {choices}")]


@dataclass(frozen=True)
class _Param:
    """One field of a query model, as the document shows it and as it is read."""

    names: tuple[str, ...]  # as sent; the first is documented, the others also work
    sent: Sent
    required: bool
    schema: dict[str, Any]
    description: str | None
    refusal: str

    def raw(self, source: Source) -> tuple[str, str] | None:
        """The first name sent with a value, and that value (None: unset)."""
        for name in self.names:
            raw = source.get(name)
            if raw is not None and self.sent.strip:
                raw = raw.strip()
            if raw or (raw is not None and not self.sent.empty_is_unset):
                return name, raw
        return None

    def document(self) -> dict[str, Any]:
        found = {
            "name": self.names[0],
            "in": self.sent.located,
            "required": self.required,
            "schema": self.schema,
        }
        if self.description:
            found["description"] = self.description
        if self.sent.located == "query" and self.sent.empty_is_unset and not self.required:
            found["allowEmptyValue"] = True
        return found


def _optional_of(annotation: Any) -> Any:
    """``X`` of ``X | None``; any other annotation as it is."""
    if get_origin(annotation) in (Union, UnionType):
        kept = [arg for arg in get_args(annotation) if arg is not NoneType]
        if len(kept) == 1:
            return kept[0]
    return annotation


def _names(name: str, field: FieldInfo) -> tuple[str, ...]:
    choices = field.validation_alias
    if isinstance(choices, AliasChoices):
        return tuple(str(choice) for choice in choices.choices)
    return (field.alias or name,)


def _schema(field: FieldInfo, inner: Any) -> dict[str, Any]:
    """The field's schema without ``| None``: absent is how a parameter is unset.

    Without the strict readers too: a bound after a `BeforeValidator` is written as pydantic's
    ``ge`` rather than JSON Schema's ``minimum``. They only narrow what the type reads.
    """
    base, *inside = get_args(inner) if get_origin(inner) is Annotated else (inner,)
    metadata = [m for m in (*inside, *field.metadata) if not isinstance(m, BeforeValidator)]
    typed: Any = Annotated[(base, *metadata)] if metadata else base
    found = {k: v for k, v in TypeAdapter(typed).json_schema().items() if k not in _NOT_SCHEMA}
    if field.default is not None and not field.is_required():
        found["default"] = field.default
    return found


def _param(name: str, field: FieldInfo) -> _Param:
    inner = _optional_of(field.annotation)
    markers = [*field.metadata, *getattr(inner, "__metadata__", ())]
    schema = _schema(field, inner)
    refusal = next((m.text for m in markers if isinstance(m, Refusal)), "has a bad value")
    choices = ", ".join(str(choice) for choice in schema.get("enum", ()))
    return _Param(
        names=_names(name, field),
        sent=next((m for m in markers if isinstance(m, Sent)), Sent()),
        required=field.is_required(),
        schema=schema,
        description=field.description,
        refusal=refusal.format(choices=choices, **schema),
    )


@functools.cache
def _params(model: type[QueryModel]) -> tuple[_Param, ...]:
    return tuple(_param(name, field) for name, field in model.model_fields.items())


def _bad(where: str, name: str, message: str) -> HttpProblem:
    return HttpProblem(400, "bad_parameter", f"{where} {name!r} {message}")


def _refused(
    params: tuple[_Param, ...], sent: dict[str, str], exc: ValidationError, where: str
) -> HttpProblem:
    """The 400 for the first parameter pydantic refused, in the words its type gives."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else ""
    param = next((p for p in params if name in p.names), None)
    if param is None:  # a rule across parameters
        return HttpProblem(400, "bad_parameter", error["msg"])
    located = "header" if param.sent.located == "header" else where
    return _bad(located, name, f"{param.refusal}, got {sent[name][:30]!r}")


class QueryModel(BaseModel):
    """The parameters of one operation: a field each (see the module's docstring)."""

    model_config = ConfigDict(frozen=True)

    @classmethod
    def read(cls) -> Self:
        """The current request's parameters (a 400 names the first bad one)."""
        return cls.of(request.args, headers=request.headers)

    @classmethod
    def of(
        cls,
        source: Source,
        *,
        headers: Source | None = None,
        where: str = "query parameter",
    ) -> Self:
        """From a query string or a form (`where` names its fields in a 400), and headers."""
        params, sent = _params(cls), {}
        for param in params:
            found = param.raw((headers or {}) if param.sent.located == "header" else source)
            if found is not None:
                sent[found[0]] = found[1]
            elif param.required:
                raise _bad(where, param.names[0], "is required")
        try:
            return cls.model_validate(sent)
        except ValidationError as exc:
            raise _refused(params, sent, exc, where) from None

    @classmethod
    def parameters(cls) -> list[dict[str, Any]]:
        """The OpenAPI parameter objects, in field order."""
        return [param.document() for param in _params(cls)]


def json_body(model: type[M]) -> M:
    """The request's JSON body as `model` (400: not JSON; 422: not valid)."""
    if not request.is_json:
        raise HttpProblem(
            400, "expected_json", "send a JSON body with Content-Type: application/json"
        )
    try:
        return model.model_validate_json(request.get_data() or b"")
    except ValidationError as exc:
        raise invalid_body(exc) from None
