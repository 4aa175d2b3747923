"""The one error tree of Signoff.

    SignoffError
    ├── InvalidInput          bad input from a caller (prompt, schema, settings)
    │   ├── PromptRejected
    │   ├── PayloadTooLarge
    │   ├── SettingsError
    │   └── PathRefused       a workspace path that leads out, or names no readable file
    ├── Forbidden             the caller's role or ownership does not allow it
    ├── NotFound              an id (or a workspace file) that names nothing
    ├── NotConfigured         a feature whose setting is unset (file reads without roots)
    ├── Conflict              the state moved on (double resolve, busy conversation)
    ├── ConversationClosed    the conversation was closed for good
    ├── Cancelled             work ended by abort()
    ├── TurnFailed            a turn ended with an error step
    ├── ProviderError         a model provider failed
    │   └── RateLimited
    └── StorageError          Redis failed or holds something unreadable
        └── CorruptRecord

Every class is rebuilt from its arguments (a message, a provider's HTTP code and Retry-After),
so Celery's JSON result format, which keeps an exception's type and arguments, carries it whole.
"""

from __future__ import annotations

__all__ = [
    "Cancelled",
    "Conflict",
    "ConversationClosed",
    "CorruptRecord",
    "Forbidden",
    "InvalidInput",
    "NotConfigured",
    "NotFound",
    "PathRefused",
    "PayloadTooLarge",
    "PromptRejected",
    "ProviderError",
    "RateLimited",
    "SettingsError",
    "SignoffError",
    "StorageError",
    "TurnFailed",
]


class SignoffError(Exception):
    """Raised for every failure Signoff reports; catch this to catch them all."""

    code = "error"

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.__class__.__name__


class InvalidInput(SignoffError):
    """Raised when a caller's input is malformed; the message names what and the limit."""

    code = "invalid_input"


class PromptRejected(InvalidInput):
    """Raised when a prompt is empty, has a bad part, or breaks the conversation's policy."""

    code = "prompt_rejected"


class PayloadTooLarge(InvalidInput):
    """Raised when a prompt or part exceeds a configured size limit."""

    code = "payload_too_large"


class SettingsError(InvalidInput):
    """Raised at start-up when a SIGNOFF_ variable holds an invalid value."""

    code = "invalid_settings"


class PathRefused(InvalidInput):
    """Raised when a workspace path leads outside the roots or names no file that may be read."""

    code = "path_refused"


class Forbidden(SignoffError):
    """Raised when the caller's role or ownership does not allow what it asks; `fields`
    names the request's fields at fault, if any."""

    code = "forbidden"

    def __init__(self, message: str, fields: tuple[str, ...] | list[str] = ()) -> None:
        super().__init__(message, tuple(fields))
        self.fields = tuple(fields)

    def __str__(self) -> str:
        return str(self.args[0])


class NotFound(SignoffError):
    """Raised when an id names no conversation, turn, notification or batch, or a path no file."""

    code = "not_found"


class NotConfigured(SignoffError):
    """Raised when a feature needs a setting that is unset or unusable, e.g. workspace roots."""

    code = "not_configured"


class Conflict(SignoffError):
    """Raised when the state moved on first: a second resolution, a busy conversation."""

    code = "conflict"


class ConversationClosed(SignoffError):
    """Raised when a prompt is sent to a conversation that was closed for good."""

    code = "closed"


class Cancelled(SignoffError):
    """Raised to a waiting caller when abort() ended the turn it was waiting for."""

    code = "cancelled"


class TurnFailed(SignoffError):
    """Raised to a waiting caller when the turn ended with an error."""

    code = "turn_failed"


class ProviderError(SignoffError):
    """Raised when a model provider fails; `http_code` is 0 when no HTTP answer came."""

    code = "provider_error"

    def __init__(self, message: str, http_code: int = 0) -> None:
        super().__init__(message, http_code)
        self.http_code = http_code

    def __str__(self) -> str:
        return str(self.args[0])

    @property
    def retryable(self) -> bool:
        return self.http_code in (0, 408, 409, 429) or self.http_code >= 500


class RateLimited(ProviderError):
    """Raised when a provider answers 429; `retry_after_s` is its Retry-After, if it sent one."""

    code = "rate_limited"

    def __init__(
        self, message: str, http_code: int = 429, retry_after_s: float | None = None
    ) -> None:
        SignoffError.__init__(self, message, http_code, retry_after_s)
        self.http_code = http_code
        self.retry_after_s = retry_after_s


class StorageError(SignoffError):
    """Raised when Redis cannot be reached or answers with an error."""

    code = "storage_error"


class CorruptRecord(StorageError):
    """Raised when a record read from Redis does not parse; the message names the key."""

    code = "corrupt_record"
