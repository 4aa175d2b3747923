"""The operator's tool policy: what each tool may do, and no submitter can loosen.

Operators write rules (`auto`, `ask` or `deny` for a tool, globally, for one batch,
or for conversations carrying a label); the tool's built-in default applies where no
rule does. A conversation's own `tools` map can only tighten what the rules say,
unless an operator (or a direct Python client, which holds the Redis credentials)
created it: then its map and `allow_all` may loosen them. An operator's `deny` is a
kill switch and wins over everything. Workers read the rules when they decide a
call, so a change applies to the next call of every conversation.

`effective_policy` is pure, so the worker (deciding) and the web (showing, and
refusing a loosening at the edge) compute the same answer.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import redis
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.json_schema import JsonDict

from shared.errors import NotFound
from shared.mcp.selection import selects
from shared.models.config import (
    INTEGRAL,
    LABEL_PATTERN,
    TOOL_NAME_PATTERN,
    ConversationConfig,
    ToolPolicy,
)
from shared.models.mcp import McpToolAnnotations
from shared.request_titles import ARGUMENT_NAME_PATTERN, MAX_TITLE_ARGUMENTS
from shared.store.connection import storage_errors
from shared.store.copies import copy_hash
from shared.store.keys import ID_PATTERN, KeySpace

__all__ = [
    "LABEL_PATTERN",
    "MAX_APPROVALS",
    "OperatorPolicy",
    "PolicyChange",
    "PolicyRule",
    "PolicyStore",
    "TitleArguments",
    "ToolInfo",
    "effective_policy",
    "loosening_fields",
    "policy_table",
    "stricter",
]

log = logging.getLogger(__name__)

ALWAYS_ASK = frozenset({"ask_operator"})  # a question for a person is never answered by policy
UNKNOWN_TOOL_DEFAULT = ToolPolicy.ASK  # a tool no worker has described yet is treated as risky
_STRICTNESS = {ToolPolicy.AUTO: 0, ToolPolicy.ASK: 1, ToolPolicy.DENY: 2}
_LOG_MAXLEN = 10_000


def stricter(first: ToolPolicy, second: ToolPolicy) -> ToolPolicy:
    """The more restrictive of two policies (deny > ask > auto)."""
    return first if _STRICTNESS[first] >= _STRICTNESS[second] else second


# The schema says what `_one_scope` checks: not both scopes (a null one is no scope), and
# approvals and separation only on an ask rule (else at their defaults, or separation false).
_ONE_SCOPE: JsonDict = {
    "not": {
        "required": ["batch_id", "label"],
        "properties": {"batch_id": {"type": "string"}, "label": {"type": "string"}},
    },
    "if": {"required": ["policy"], "properties": {"policy": {"not": {"const": "ask"}}}},
    "then": {"properties": {"approvals": {"const": 1}, "separation": {"enum": [None, False]}}},
}


MAX_APPROVALS = 10


class PolicyRule(BaseModel):
    """One operator rule: a tool's policy, globally or for one batch or one label; for `ask`,
    how many distinct approvers must allow a call, and whether its creator may approve it."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_ONE_SCOPE)

    tool: str = Field(pattern=TOOL_NAME_PATTERN)
    policy: ToolPolicy
    batch_id: str | None = Field(None, pattern=f"^{ID_PATTERN}$", description="Only this batch.")
    label: str | None = Field(
        None, pattern=LABEL_PATTERN, description="Only conversations carrying this label."
    )
    approvals: Annotated[int, INTEGRAL] = Field(
        1,
        ge=1,
        le=MAX_APPROVALS,
        description="With `ask`: distinct approvers who must allow a call (with the same "
        "arguments) before it runs; any deny ends it.",
    )
    separation: bool | None = Field(
        None,
        description="With `ask`: true, whoever created the conversation (or its batch, "
        "schedule or trigger) may not approve its calls; false, they may; null (the "
        "default): they may not unless they are an operator.",
    )

    @model_validator(mode="after")
    def _one_scope(self) -> PolicyRule:
        if self.batch_id is not None and self.label is not None:
            raise ValueError("a rule is scoped by batch_id or by label, not both")
        if self.policy is not ToolPolicy.ASK and (self.approvals != 1 or self.separation):
            raise ValueError("approvals and separation apply to an ask rule only")
        return self

    def stored(self) -> str:
        """The rule's value as stored: the policy alone, or JSON when it has options."""
        if self.approvals == 1 and self.separation is None:
            return self.policy.value
        options = {"policy": self.policy.value, "approvals": self.approvals}
        return json.dumps(options | {"separation": self.separation})

    @property
    def scope(self) -> str:
        return scope_of(batch_id=self.batch_id, label=self.label)

    @property
    def field(self) -> str:
        return f"{self.tool}|{self.scope}"


def scope_of(*, batch_id: str | None = None, label: str | None = None) -> str:
    """How a rule's scope is written: ``*``, ``batch:<id>`` or ``label:<label>``."""
    if batch_id is not None:
        return f"batch:{batch_id}"
    if label is not None:
        return f"label:{label}"
    return "*"


def _rule_of(field: str, value: str) -> PolicyRule:
    tool, _, scope = field.partition("|")
    kind, _, name = scope.partition(":")
    scoped = {"batch_id": name} if kind == "batch" else {"label": name} if kind == "label" else {}
    options: dict[str, Any] = json.loads(value) if value.startswith("{") else {"policy": value}
    return PolicyRule(tool=tool, **options, **scoped)


class TitleArguments(BaseModel):
    """The arguments that title a tool's requests, in the order shown: the operator's choice
    (`shared/request_titles.py`; without one, the first short string arguments)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(pattern=TOOL_NAME_PATTERN)
    arguments: list[Annotated[str, Field(pattern=ARGUMENT_NAME_PATTERN)]] = Field(
        min_length=1,
        max_length=MAX_TITLE_ARGUMENTS,
        json_schema_extra={"uniqueItems": True},
        description='One or two argument names, e.g. ["to", "subject"]: '
        'send_email to ana@example.com: "Refund 120 EUR".',
    )

    @model_validator(mode="after")
    def _distinct(self) -> TitleArguments:
        if len(set(self.arguments)) != len(self.arguments):
            raise ValueError("name each argument once")
        return self


class ToolInfo(BaseModel):
    """A tool as workers describe it, so the web can show and check policies without them.

    An MCP server's tool also names its server, its name there, and its annotations.
    """

    name: str
    description: str = ""
    default_policy: ToolPolicy
    server: str | None = None
    server_tool: str | None = None
    annotations: McpToolAnnotations | None = None

    def enabled_in(self, config: ConversationConfig) -> bool | None:
        """For an MCP tool: whether the conversation selects it; None for a built-in one."""
        if self.server is None:
            return None
        return selects(config.mcp, self.server, self.server_tool or "")


@dataclass(frozen=True)
class OperatorPolicy:
    """The operator's rules, read once; answers for one tool in one scope."""

    rules: tuple[PolicyRule, ...] = ()

    def base(
        self,
        tool: str,
        *,
        default: ToolPolicy,
        batch_id: str | None = None,
        labels: Sequence[str] = (),
    ) -> ToolPolicy:
        """The most specific rule (label, then batch, then global), else the tool's default.

        Several matching label rules: the strictest of them.
        """
        mine = [rule for rule in self.rules if rule.tool == tool]
        by_label = [r.policy for r in mine if r.label is not None and r.label in labels]
        if by_label:
            found = by_label[0]
            for policy in by_label[1:]:
                found = stricter(found, policy)
            return found
        for rule in mine:
            if batch_id is not None and rule.batch_id == batch_id:
                return rule.policy
        for rule in mine:
            if rule.scope == "*":
                return rule.policy
        return default

    def rule_for(
        self, tool: str, *, batch_id: str | None = None, labels: Sequence[str] = ()
    ) -> PolicyRule | None:
        """The rule `base` follows for `tool` here, None when none does; several label rules
        combine: the strictest policy, the most approvals, separation if any asks for it."""
        mine = [rule for rule in self.rules if rule.tool == tool]
        by_label = [r for r in mine if r.label is not None and r.label in labels]
        if by_label:
            policy = by_label[0].policy
            for rule in by_label[1:]:
                policy = stricter(policy, rule.policy)
            wanted = [r.separation for r in by_label if r.separation is not None]
            return by_label[0].model_copy(
                update={
                    "policy": policy,
                    "approvals": max(r.approvals for r in by_label),
                    "separation": any(wanted) if wanted else None,
                }
            )
        for rule in mine:
            if batch_id is not None and rule.batch_id == batch_id:
                return rule
        return next((rule for rule in mine if rule.scope == "*"), None)


def policy_table(
    catalog: Mapping[str, ToolInfo], operator: OperatorPolicy, config: ConversationConfig
) -> dict[str, ToolPolicy | None]:
    """Every described tool's effective policy in one conversation (for display)."""
    return {
        name: effective_policy(
            name,
            default=info.default_policy,
            operator=operator,
            config=config,
            enabled=info.enabled_in(config),
        )
        for name, info in sorted(catalog.items())
    }


def effective_policy(
    tool: str,
    *,
    default: ToolPolicy,
    operator: OperatorPolicy,
    config: ConversationConfig,
    sticky_allow: bool = False,
    enabled: bool | None = None,
) -> ToolPolicy | None:
    """What a call of `tool` does in this conversation; None when the tool is disabled.

    `sticky_allow`: an operator allowed this tool for the rest of the conversation or batch.
    `enabled`: for an MCP tool, whether the conversation's `mcp` selects it (its `tools`
    map then only tightens it); None: enabled as the `tools` map says.
    """
    if enabled is False or (
        enabled is None and config.tools is not None and tool not in config.tools
    ):
        return None
    if tool in ALWAYS_ASK:
        return ToolPolicy.ASK
    base = operator.base(tool, default=default, batch_id=config.batch_id, labels=config.labels)
    if base is ToolPolicy.DENY:
        return ToolPolicy.DENY
    if sticky_allow:
        return ToolPolicy.AUTO
    own = config.tools.get(tool) if config.tools is not None else None
    if config.policy_may_loosen:
        return ToolPolicy.AUTO if config.allow_all else own or base
    return stricter(base, own) if own is not None else base


def loosening_fields(
    *,
    tools: Mapping[str, ToolPolicy] | None,
    allow_all: bool,
    operator: OperatorPolicy,
    catalog: Mapping[str, ToolInfo],
    batch_id: str | None = None,
    labels: Sequence[str] = (),
) -> list[str]:
    """The request fields that would loosen the operator's policy (for a 403 naming them)."""
    fields = ["allow_all"] if allow_all else []
    for name, wanted in sorted((tools or {}).items()):
        info = catalog.get(name)
        default = info.default_policy if info is not None else UNKNOWN_TOOL_DEFAULT
        base = operator.base(name, default=default, batch_id=batch_id, labels=labels)
        if stricter(base, wanted) is not wanted:
            fields.append(f"tools.{name}")
    return fields


class PolicyChange(BaseModel):
    """One entry of the policy log."""

    id: str = ""
    actor: str
    at: float
    tool: str
    scope: str
    before: ToolPolicy | None
    after: ToolPolicy | None


class PolicyStore:
    """The rules, their change log, and the tool catalog workers publish."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.keys = keys

    def load(self) -> OperatorPolicy:
        """Every rule; a rule that does not parse is skipped (and logged), never fatal."""
        with storage_errors("reading the tool policy"):
            raw: dict[str, str] = self.client.hgetall(self.keys.policy_rules())  # type: ignore[assignment]
        return self.parse(raw)

    def parse(self, raw: dict[str, str]) -> OperatorPolicy:
        """The rules from their hash, as HGETALL returned it (a bad rule: skipped, logged)."""
        rules = []
        for field, value in sorted(raw.items()):
            try:
                rules.append(_rule_of(field, value))
            except (ValueError, ValidationError):
                log.warning("skipping a policy rule that does not parse: %s %r", field, value)
        return OperatorPolicy(tuple(rules))

    def set(self, rule: PolicyRule, *, actor: str) -> PolicyChange:
        """Adds or replaces the rule for the tool in its scope, and logs the change."""
        return self._change(rule.tool, rule.scope, rule.field, rule, actor)

    def remove(
        self, tool: str, *, batch_id: str | None = None, label: str | None = None, actor: str
    ) -> PolicyChange:
        """Removes one rule (NotFound names it when there is none), and logs the change."""
        scope = scope_of(batch_id=batch_id, label=label)
        return self._change(tool, scope, f"{tool}|{scope}", None, actor)

    def _change(
        self, tool: str, scope: str, field: str, rule: PolicyRule | None, actor: str
    ) -> PolicyChange:
        after = rule.policy if rule is not None else None
        key = self.keys.policy_rules()
        with (
            storage_errors("changing the tool policy"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            while True:
                try:
                    pipe.watch(key)
                    before_raw = pipe.hget(key, field)
                    before = _policy_or_none(before_raw, field)
                    if after is None and before_raw is None:
                        raise NotFound(
                            f"there is no policy rule for tool {tool!r} in scope {scope}"
                        )
                    change = PolicyChange(
                        actor=actor,
                        at=time.time(),
                        tool=tool,
                        scope=scope,
                        before=before,
                        after=after,
                    )
                    pipe.multi()
                    if after is None:
                        pipe.hdel(key, field)
                    else:
                        pipe.hset(key, field, rule.stored() if rule else "")
                    pipe.xadd(
                        self.keys.policy_log(),
                        {"entry": change.model_dump_json(exclude={"id"})},
                        maxlen=_LOG_MAXLEN,
                        approximate=True,
                    )
                    results = pipe.execute()
                    copies = self.keys.every_shard(self.keys.policy_rules_copy)
                    copy_hash(self.client, key, copies)
                    return change.model_copy(update={"id": str(results[-1])})
                except redis.WatchError:
                    continue

    def changes(self, *, limit: int = 100) -> list[PolicyChange]:
        """The latest changes, newest first; an entry that does not parse is skipped."""
        with storage_errors("reading the policy log"):
            raw: Any = self.client.xrevrange(self.keys.policy_log(), count=limit)
        found = []
        for entry_id, fields in raw:
            try:
                change = PolicyChange.model_validate_json(fields.get("entry", ""))
            except ValidationError:
                log.warning("skipping a policy log entry that does not parse: %s", entry_id)
                continue
            found.append(change.model_copy(update={"id": str(entry_id)}))
        return found

    def title_arguments(self) -> dict[str, tuple[str, ...]]:
        """The operator's title arguments by tool; an entry that does not parse is skipped."""
        with storage_errors("reading the request titles"):
            raw: dict[str, str] = self.client.hgetall(self.keys.policy_titles())  # type: ignore[assignment]
        found = {}
        for tool, names in sorted(raw.items()):
            try:
                chosen = TitleArguments(tool=tool, arguments=json.loads(names))
                found[tool] = tuple(chosen.arguments)
            except (ValueError, ValidationError):
                log.warning("skipping request title arguments that do not parse: %s", tool)
        return found

    def set_title_arguments(self, titles: TitleArguments) -> None:
        """Titles the tool's requests by these arguments (pending ones too: titles are read
        when shown)."""
        with storage_errors("setting the request titles"):
            self.client.hset(self.keys.policy_titles(), titles.tool, json.dumps(titles.arguments))

    def clear_title_arguments(self, tool: str) -> TitleArguments:
        """Back to the default title arguments; returns the choice removed (NotFound: none)."""
        key = self.keys.policy_titles()
        with (
            storage_errors("clearing the request titles"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.hget(key, tool)
            pipe.hdel(key, tool)
            raw, removed = pipe.execute()
        if not removed:
            raise NotFound(f"no title arguments are chosen for tool {tool!r}")
        try:
            return TitleArguments(tool=tool, arguments=json.loads(raw))
        except (ValueError, ValidationError):
            return TitleArguments.model_construct(tool=tool, arguments=[])  # removed all the same

    def publish_catalog(self, tools: Iterable[ToolInfo]) -> None:
        """Describes a worker's tools (last writer wins: workers of one deployment agree)."""
        mapping: dict[Any, Any] = {tool.name: tool.model_dump_json() for tool in tools}
        if mapping:
            with storage_errors("publishing the tool catalog"):
                self.client.hset(self.keys.tool_catalog(), mapping=mapping)

    def catalog(self) -> dict[str, ToolInfo]:
        """The tools workers described, by name; an entry that does not parse is skipped."""
        with storage_errors("reading the tool catalog"):
            raw: dict[str, str] = self.client.hgetall(self.keys.tool_catalog())  # type: ignore[assignment]
        found = {}
        for name, doc in sorted(raw.items()):
            try:
                found[name] = ToolInfo.model_validate_json(doc)
            except ValidationError:
                log.warning("skipping a tool catalog entry that does not parse: %s", name)
        return found


def _policy_or_none(raw: Any, field: str) -> ToolPolicy | None:
    try:
        return _rule_of(field, str(raw)).policy if raw is not None else None
    except (ValueError, ValidationError):
        return None
