"""Where archive files live: a directory (the default) or an S3-compatible bucket.

Both store one compressed file per conversation and put it whole or not at all: the
directory writes a temporary file, fsyncs it and renames it; an S3 PUT makes an object
appear whole (and S3 checks its SHA-256 against the bytes it received). Putting the same
conversation again replaces its file, so a repeated pass archives nothing twice.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from shared.archive.location import check_archive_url
from shared.errors import StorageError
from shared.store.keys import check_id

if TYPE_CHECKING:
    from shared.settings import Settings

__all__ = [
    "ArchiveStorage",
    "ArchiveUnavailable",
    "DirectoryStorage",
    "S3Storage",
    "storage_for",
]


class ArchiveUnavailable(StorageError):
    """The archive cannot be written or read now (its bucket or folder refuses, or is away)."""

    code = "archive_unavailable"


class ArchiveStorage(Protocol):
    def put(self, cid: str, data: bytes) -> None:
        """Stores a conversation's file whole, replacing any earlier one."""

    def get(self, cid: str) -> bytes | None:
        """A conversation's file, or None when it has none."""

    def where(self, cid: str) -> str:
        """Where its file is, for messages."""

    def probe(self) -> str:
        """Where the archive is, once it is checked to be there (ArchiveUnavailable if not)."""


def _name(cid: str) -> str:
    """A conversation's file name under the archive: spread over folders by its id's start."""
    check_id(cid, "conversation id")
    return f"{cid[:2].lower()}/{cid}.jsonl.gz"


class DirectoryStorage:
    """Files under a local (or mounted) directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, cid: str) -> Path:
        return self.root / _name(cid)

    def where(self, cid: str) -> str:
        return str(self.path(cid))

    def put(self, cid: str, data: bytes) -> None:
        """A temporary file, fsync, rename, fsync the folder: a crash leaves it whole or absent."""
        path = self.path(cid)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        except OSError as exc:
            raise ArchiveUnavailable(f"the archive {self.root} cannot be written: {exc}") from exc
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
            folder = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        except BaseException as exc:
            Path(temporary).unlink(missing_ok=True)
            if isinstance(exc, OSError):  # a full disk, a read-only mount
                raise ArchiveUnavailable(f"{path} cannot be written: {exc}") from exc
            raise

    def probe(self) -> str:
        if not self.root.exists():
            return f"the directory {self.root} (made by the first archive)"
        if not self.root.is_dir() or not os.access(self.root, os.W_OK | os.X_OK):
            raise ArchiveUnavailable(f"{self.root} is not a directory this process can write")
        return f"the directory {self.root}"

    def get(self, cid: str) -> bytes | None:
        path = self.path(cid)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ArchiveUnavailable(f"the archive file {path} cannot be read: {exc}") from exc


class S3Storage:
    """Objects in an S3-compatible bucket, through boto3 (credentials by its usual chain:
    AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, or an instance role)."""

    def __init__(self, url: str, *, endpoint_url: str = "", region: str = "") -> None:
        self.bucket, self.prefix = check_archive_url(url)
        self.endpoint_url = endpoint_url or None
        self.region = region or None
        self._s3: Any = None

    def _client(self) -> Any:
        if self._s3 is None:  # boto3 loads only where an S3 archive is configured
            import boto3
            from botocore.config import Config

            self._s3 = boto3.client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=self.region,
                config=Config(
                    connect_timeout=5,
                    read_timeout=30,
                    retries={"max_attempts": 3, "mode": "standard"},
                ),
            )
        return self._s3

    def key(self, cid: str) -> str:
        return f"{self.prefix}/{_name(cid)}" if self.prefix else _name(cid)

    def where(self, cid: str) -> str:
        return f"s3://{self.bucket}/{self.key(cid)}"

    def probe(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}"
        with _s3_errors(f"reaching {where}"):
            self._client().head_bucket(Bucket=self.bucket)
        return f"{where} at {self.endpoint_url or 'AWS'}"

    def put(self, cid: str, data: bytes) -> None:
        with _s3_errors(f"writing {self.where(cid)}"):
            self._client().put_object(
                Bucket=self.bucket,
                Key=self.key(cid),
                Body=data,
                ContentType="application/gzip",
                ChecksumAlgorithm="SHA256",
            )

    def get(self, cid: str) -> bytes | None:
        from botocore.exceptions import ClientError

        with _s3_errors(f"reading {self.where(cid)}"):
            try:
                found = self._client().get_object(Bucket=self.bucket, Key=self.key(cid))
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    return None
                raise
            return bytes(found["Body"].read())


@contextmanager
def _s3_errors(what: str) -> Iterator[None]:
    """botocore's errors as ArchiveUnavailable naming what was being done (never a secret:
    botocore's messages carry codes and the endpoint, not credentials)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "error"), error.get("Message", "")
        raise ArchiveUnavailable(f"{what}: {code}" + (f": {message}" if message else "")) from exc
    except BotoCoreError as exc:
        raise ArchiveUnavailable(f"{what}: {exc}") from exc


def storage_for(settings: Settings) -> ArchiveStorage:
    """The archive the settings name: their bucket, else their directory."""
    if settings.archive_url:
        return S3Storage(
            settings.archive_url,
            endpoint_url=settings.archive_s3_endpoint_url,
            region=settings.archive_s3_region,
        )
    return DirectoryStorage(Path(settings.archive_dir))
