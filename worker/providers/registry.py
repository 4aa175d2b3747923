"""Choosing a provider by name. The configured provider and model are used exactly."""

from __future__ import annotations

import importlib
import threading

from shared.errors import ProviderError
from shared.settings import Settings
from worker.providers.base import Provider

__all__ = ["KNOWN_PROVIDERS", "ProviderFactory", "preload"]

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
        if name not in _CLASSES:
            raise ProviderError(
                f"unknown provider {name!r}; known providers: {', '.join(KNOWN_PROVIDERS)}"
            )
        module, cls = _CLASSES[name]
        provider: Provider = getattr(importlib.import_module(module), cls)(self.settings)
        return provider


def preload(name: str) -> None:
    """Imports a provider's module (and its SDK) before the first call needs it.

    The worker freezes its start-up heap out of the collector's passes (`worker/heap.py`);
    the openai SDK imported at the first call was left in them, a few hundred thousand
    objects every full pass walked again, and the first calls waited for the import.
    """
    if name in _CLASSES:
        importlib.import_module(_CLASSES[name][0])


_CLASSES = {
    "scripted": ("worker.providers.scripted", "ScriptedProvider"),
    "openai": ("worker.providers.openai_provider", "OpenAIProvider"),
    "ollama": ("worker.providers.ollama", "OllamaProvider"),
}
