"""An S3 archive's URL, checked: the settings refuse a malformed one at start-up."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["check_archive_url"]

# S3's bucket names: 3-63 of lowercase letters, digits, dots and hyphens, starting and
# ending with a letter or digit.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")
_PREFIX = re.compile(r"[A-Za-z0-9_.\-/]{0,512}")


def check_archive_url(url: str) -> tuple[str, str]:
    """(bucket, key prefix) of an `s3://bucket[/prefix]` URL; ValueError naming the fault."""
    parts = urlsplit(url)
    if parts.scheme != "s3":
        raise ValueError(
            "must be s3://<bucket>[/<prefix>], or empty for the directory SIGNOFF_ARCHIVE_DIR"
        )
    bucket, prefix = parts.netloc, parts.path.strip("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise ValueError(
            f"{bucket!r} is not a bucket name (3-63 lowercase letters, digits, dots, hyphens)"
        )
    if parts.query or parts.fragment or not _PREFIX.fullmatch(prefix) or "//" in prefix:
        raise ValueError(
            f"the prefix {prefix!r} may hold only letters, digits, _ . - and single slashes"
        )
    return bucket, prefix
