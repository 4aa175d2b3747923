"""A page action's refusal shown as a flash message on the page it returns to.

Operator forms post, act and redirect back to their list; a refusal (an unknown name, a
conflict) is the store's `SignoffError`, whose message is written for the person who asked.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from flask import flash

from shared.errors import SignoffError

__all__ = ["flash_refusal"]


@contextmanager
def flash_refusal(prefix: str = "") -> Iterator[None]:
    """Flashes a `SignoffError` raised inside as an error (after `prefix`) instead of raising."""
    try:
        yield
    except SignoffError as exc:
        flash(f"{prefix}{exc.message}", "error")
