"""Named agents in Redis: every change is a new version, and conversations name one.

`signoff:agents` maps each name to its latest version; each agent keeps every version in
its own hash, so a conversation created with version 3 can still show what that was.
An agent's `tools` map must sit inside the operator's tool policy when it is written, and
a conversation running as an agent never loosens the policy (`policy_may_loosen` is off),
so a later change of the rules still wins.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from pydantic import ValidationError

from shared.errors import Conflict, CorruptRecord, InvalidInput, NotFound
from shared.models.agents import Agent, AgentSpec, NewAgent
from shared.models.config import AgentOptions, ConversationConfig, ConversationOptions
from shared.models.model_settings import ModelSettings, check_supported
from shared.schema import check_schema
from shared.settings import Settings
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.policy import PolicyStore, loosening_fields

__all__ = ["AgentStore", "agent_decides", "agent_options", "resolve_options"]

# What a conversation naming an agent may still choose: how the conversation itself is
# kept, not how it runs, and model settings over the agent's (field by field). The rest is
# the agent's.
_CONVERSATION_ONLY = frozenset(
    {"agent", "agent_version", "max_history_size", "double_text_policy", "compaction_token_budget"}
)
_MERGED = frozenset({"model_settings"})


def agent_decides() -> dict[str, object]:
    """The options a conversation naming an agent must leave out (or at their defaults)."""
    fields = ConversationOptions.model_fields
    return {
        name: field.default
        for name, field in fields.items()
        if name not in _CONVERSATION_ONLY | _MERGED
    }


class AgentStore:
    """Creates, reads, versions and deletes agents; writes check the operator's policy."""

    def __init__(self, client: redis.Redis, keys: KeySpace, policies: PolicyStore) -> None:
        self.client = client
        self.keys = keys
        self.policies = policies

    def create(self, new: NewAgent, *, actor: str) -> Agent:
        """Version 1 of a new agent; Conflict when the name is taken."""
        return self._write(new.name, new, actor=actor, creating=True)

    def update(self, name: str, spec: AgentSpec, *, actor: str) -> Agent:
        """A new version of an existing agent (NotFound when there is none)."""
        return self._write(name, spec, actor=actor, creating=False)

    def get(self, name: str, version: int | None = None) -> Agent:
        """One version of an agent, its latest by default."""
        with storage_errors("reading an agent"):
            latest = self.client.hget(self.keys.agents(), name)
        if latest is None:
            raise NotFound(f"there is no agent named {name!r}")
        wanted = int(str(latest)) if version is None else version
        with storage_errors("reading an agent"):
            doc = self.client.hget(self.keys.agent_versions(name), str(wanted))
        if doc is None:
            raise NotFound(f"agent {name!r} has no version {wanted} (its latest is {latest!s})")
        return _parse(self.keys.agent_versions(name), doc)

    def versions(self, name: str) -> list[Agent]:
        """Every version of an agent, oldest first."""
        self.get(name)
        key = self.keys.agent_versions(name)
        with storage_errors("reading an agent's versions"):
            raw: dict[str, str] = self.client.hgetall(key)  # type: ignore[assignment]
        return sorted((_parse(key, doc) for doc in raw.values()), key=lambda a: a.version)

    def list(self) -> list[Agent]:
        """The latest version of every agent, by name."""
        with storage_errors("listing agents"):
            latest: dict[str, str] = self.client.hgetall(self.keys.agents())  # type: ignore[assignment]
            with self.client.pipeline(transaction=False) as pipe:
                for name, version in sorted(latest.items()):
                    pipe.hget(self.keys.agent_versions(name), version)
                docs = pipe.execute()
        return [
            _parse(self.keys.agent_versions(name), doc)
            for name, doc in zip(sorted(latest), docs, strict=True)
            if doc is not None
        ]

    def delete(self, name: str) -> None:
        """Removes the agent and its versions; conversations keep the configuration they ran."""
        with storage_errors("deleting an agent"), self.client.pipeline(transaction=True) as pipe:
            pipe.hdel(self.keys.agents(), name)
            pipe.delete(self.keys.agent_versions(name))
            removed, _ = pipe.execute()
        if not removed:
            raise NotFound(f"there is no agent named {name!r}")

    def _write(self, name: str, spec: AgentSpec, *, actor: str, creating: bool) -> Agent:
        self._check(spec)
        index, versions = self.keys.agents(), self.keys.agent_versions(name)
        with storage_errors("writing an agent"), self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(index)
                    latest = pipe.hget(index, name)
                    if creating and latest is not None:
                        raise Conflict(f"agent {name!r} already exists (version {latest!s})")
                    if not creating and latest is None:
                        raise NotFound(f"there is no agent named {name!r}")
                    agent = Agent(
                        **spec.model_dump(include=set(AgentSpec.model_fields)),
                        name=name,
                        version=1 if latest is None else int(str(latest)) + 1,
                        created_at=time.time(),
                        created_by=actor,
                    )
                    pipe.multi()
                    pipe.hset(versions, str(agent.version), agent.model_dump_json())
                    pipe.hset(index, name, str(agent.version))
                    pipe.execute()
                    return agent
                except redis.WatchError:
                    continue

    def _check(self, spec: AgentSpec) -> None:
        """The schema is a schema; the tools map asks for nothing the operator's rules do not."""
        if spec.response_schema is not None:
            check_schema(spec.response_schema)
        if spec.model_settings is not None and spec.provider is not None:
            check_supported(spec.provider, spec.model_settings)
        looser = loosening_fields(
            tools=spec.tools,
            allow_all=False,
            operator=self.policies.load(),
            catalog=self.policies.catalog(),
            labels=spec.labels or (),
        )
        if looser:
            raise InvalidInput(
                "an agent's tool policy must sit inside the operator's: "
                f"{', '.join(looser)} would loosen it (see `signoff policy show`)"
            )


def _parse(key: str, doc: Any) -> Agent:
    try:
        return Agent.model_validate_json(doc)
    except ValidationError as exc:
        raise CorruptRecord(f"{key} holds an agent that does not parse: {exc}") from exc


# The options fields a caller's body may set (a body also carries e.g. `conversation_id`).
_OPTION_NAMES = frozenset(ConversationOptions.model_fields)


def agent_options(agent: Agent, chosen: ConversationOptions | None = None) -> ConversationOptions:
    """The options a conversation running as `agent` is created with.

    `chosen` may add only how the conversation is kept (history size, double-text policy,
    compaction budget) and model settings over the agent's; an option the agent decides is
    refused, naming it.
    """
    chosen = chosen or ConversationOptions()
    fixed = sorted(
        name
        for name in (chosen.model_fields_set & _OPTION_NAMES) - _CONVERSATION_ONLY - _MERGED
        if getattr(chosen, name) != ConversationOptions.model_fields[name].default
    )
    if fixed:
        raise InvalidInput(
            f"agent {agent.name!r} decides {', '.join(fixed)}: leave them out, "
            "or update the agent (`signoff agent update`)"
        )
    own = agent.model_dump(include=set(AgentOptions.model_fields))
    kept = chosen.model_dump(include=set(_CONVERSATION_ONLY), exclude_none=True)
    if chosen.model_settings is not None:
        agents = agent.model_settings or ModelSettings()
        kept["model_settings"] = chosen.model_settings.over(agents).model_dump()
    return ConversationOptions.model_validate(
        {**own, **kept, "agent": agent.name, "agent_version": agent.version}
    )


def resolve_options(
    options: ConversationOptions,
    settings: Settings,
    *,
    policy_may_loosen: bool,
    agents: AgentStore,
) -> ConversationConfig:
    """The stored configuration of a new conversation, the named agent's when it names one.

    An agent's conversation never loosens the operator's tool policy, whoever creates it.
    """
    if options.agent is None:
        if options.agent_version is not None:
            raise InvalidInput("agent_version needs agent: name the agent to run")
        return options.resolve(settings, policy_may_loosen=policy_may_loosen)
    try:
        agent = agents.get(options.agent, options.agent_version)
    except NotFound as exc:
        raise InvalidInput(f"agent: {exc}") from None
    return agent_options(agent, options).resolve(settings, policy_may_loosen=False)
