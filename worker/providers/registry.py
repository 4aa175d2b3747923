"""Choosing a provider by name. The configured provider and model are used exactly."""

from __future__ import annotations

import threading

from shared.errors import ProviderError
from shared.settings import Settings
from worker.providers.base import Provider

__all__ = ["KNOWN_PROVIDERS", "ProviderFactory"]

KNOWN_PROVIDERS = ("scripted", "openai", "ollama")


class ProviderFactory:
    """Builds each provider once per worker process, on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._built: dict[str, Provider] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Provider:
        with self._lock:
            if name not in self._built:
                self._built[name] = self._build(name)
            return self._built[name]

    def _build(self, name: str) -> Provider:
        if name == "scripted":
            from worker.providers.scripted import ScriptedProvider

            return ScriptedProvider(self.settings)
        if name == "openai":
            from worker.providers.openai_provider import OpenAIProvider

            return OpenAIProvider(self.settings)
        if name == "ollama":
            from worker.providers.ollama import OllamaProvider

            return OllamaProvider(self.settings)
        raise ProviderError(
            f"unknown provider {name!r}; known providers: {', '.join(KNOWN_PROVIDERS)}"
        )
