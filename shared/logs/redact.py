"""Secrets never reach a log line: known values and the shapes secrets have are masked.

Known values are the settings' secrets (API keys, passwords, the session and metrics keys,
the Redis and broker passwords). Shapes catch what no setting names: API tokens (`so_...`),
webhook secrets (`whsec_...`), OpenAI and Slack keys, bearer credentials, signed approval links,
passwords in URLs and `password=...` / `"token": "..."` pairs. A line is masked as a
whole, after formatting, so a secret in an argument or a traceback is masked too.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from shared.settings import Settings

__all__ = ["MASK", "Redactor"]

MASK = "***"
MIN_KNOWN_CHARS = 6  # shorter values are too likely to be ordinary words

# Each shape with the text (lower case) a line must hold for it to match: most lines hold
# none, and a substring test is much cheaper than a regular expression tried at every position.
_SHAPES = [
    (re.compile(r"\bso_[A-Za-z0-9_-]{16,}"), "so_" + MASK, ("so_",)),
    (re.compile(r"\bwhsec_[A-Za-z0-9+/=]{8,}"), "whsec_" + MASK, ("whsec_",)),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{12,}"), "sk-" + MASK, ("sk-",)),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{8,}"), "xox-" + MASK, ("xox",)),
    (
        re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=*-]+"),
        r"\1 " + MASK,
        ("bearer", "basic"),
    ),
    (re.compile(r"/approve/[^\s\"'?#]+"), "/approve/" + MASK, ("/approve/",)),
    (re.compile(r"(?i)(://[^:/@\s]*:)[^@\s]+@"), r"\1" + MASK + "@", ("://",)),
    (
        re.compile(
            r"(?i)((?:password|passwd|secret|token|api[_-]?key|authorization)[\"']?\s*[:=]\s*"
            r"[\"']?)[^\s\"',;&}]+"
        ),
        r"\1" + MASK,
        ("password", "passwd", "secret", "token", "api", "authorization"),
    ),
]


class Redactor:
    """Masks secrets in text."""

    def __init__(self, known: list[str]) -> None:
        values = sorted({v for v in known if len(v) >= MIN_KNOWN_CHARS}, key=len, reverse=True)
        self._values = tuple(values)
        self._known = re.compile("|".join(re.escape(v) for v in values)) if values else None

    @classmethod
    def for_settings(cls, settings: Settings) -> Redactor:
        """Masks every secret the settings hold, and the shapes of others."""
        known = [
            value.get_secret_value()
            for name in type(settings).model_fields
            if hasattr(value := getattr(settings, name), "get_secret_value")
        ]
        urls = (settings.redis_url, settings.broker_url)
        passwords = [password for url in urls if (password := urlsplit(url).password)]
        return cls([*known, *passwords])

    def __call__(self, text: str) -> str:
        # a substring test per known value first: their alternation is tried at every position
        if self._known is not None and any(value in text for value in self._values):
            text = self._known.sub(MASK, text)
        lower = text.lower()
        for pattern, replacement, needs in _SHAPES:
            if any(literal in lower for literal in needs):
                text = pattern.sub(replacement, text)
        return text
