"""moto's S3 API server as a process of its own, for the archive's tests: boto3 talks to
it over HTTP on loopback as it would to a bucket."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import httpx

from shared.local.embedded_redis import free_port
from tests.stack import terminate

BUCKET = "signoff-archive"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "archive-key", "AWS_SECRET_ACCESS_KEY": "archive-secret"}


class S3Server:
    """moto's S3 API server as a process of its own, which the test can kill and start."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(self.url, timeout=1)
                return
            except httpx.TransportError:
                assert self.process.poll() is None, "the S3 server exited"
                assert time.monotonic() < deadline, "the S3 server did not answer in 60 s"
                time.sleep(0.1)

    def stop(self) -> None:
        terminate(self.process)
        self.process = None

    @classmethod
    @contextmanager
    def running(cls) -> Iterator[S3Server]:
        """A started server with the bucket made; stopped after."""
        server = cls()
        server.start()
        try:
            server.s3().create_bucket(Bucket=BUCKET)
            yield server
        finally:
            server.stop()

    def env(self, prefix: str = "prod/signoff") -> dict[str, str]:
        """The settings and credentials that archive to the bucket under `prefix`."""
        return {
            **CREDENTIALS,
            "SIGNOFF_ARCHIVE_URL": f"s3://{BUCKET}/{prefix}",
            "SIGNOFF_ARCHIVE_S3_ENDPOINT_URL": self.url,
            "SIGNOFF_ARCHIVE_S3_REGION": "us-east-1",
        }

    def s3(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )
