"""Patterns for JSON Schema documents (the API's) that say what Signoff's own checks accept.

The document's patterns are read by ECMA-262 (clients), Rust (pydantic, and the
validators fuzzers use) and Python `re` alike only if they avoid ``\\s``, ``\\w`` and
``\\d``, whose meaning differs between them; so the character classes are written out.
"""

from __future__ import annotations

__all__ = ["BLANK", "NOT_BLANK", "NOT_SPACE", "SPACE"]

# What `str.strip()` removes: the characters for which `str.isspace()` holds.
SPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# What a prompt loses: whitespace, and the control characters
# `shared.validation.strip_control_characters` removes.
BLANK = r"\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"

# Searched, not matched whole: a value with one such character passes.
NOT_SPACE = f"[^{SPACE}]"  # not empty once stripped
NOT_BLANK = f"[^{BLANK}]"  # not empty once cleaned and stripped
