"""A real S3-compatible server for the tests: moto's server, run as a process on loopback."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import pytest

BUCKET = "kestrel-archive"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test-key",
    "AWS_SECRET_ACCESS_KEY": "test-secret",
    "AWS_REGION": "us-east-1",
}


@dataclass
class S3Server:
    """One server process; `env` holds what a client needs to reach it."""

    process: subprocess.Popen[bytes]
    endpoint: str

    @classmethod
    def start(cls) -> S3Server:
        """Start a server on a free loopback port, wait until it answers, make the bucket."""
        pytest.importorskip("moto.server")
        boto3 = pytest.importorskip("boto3")
        port = _free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"},
        )
        server = cls(process, f"http://127.0.0.1:{port}")
        server._wait()
        client = boto3.client("s3", endpoint_url=server.endpoint, **_boto_credentials())
        client.create_bucket(Bucket=BUCKET)
        return server

    @property
    def env(self) -> dict[str, str]:
        """The standard AWS variables that point a client at this server."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def url(self, prefix: str) -> str:
        """An archive URL in the bucket, under `prefix`."""
        return f"s3://{BUCKET}/{prefix}"

    def client(self) -> Any:
        """A boto3 client of the server, to look at or spoil objects behind Kestrel's back."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, **_boto_credentials())

    def stop(self) -> None:
        """Stop the server; connections to its port are refused from now on."""
        self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _wait(self) -> None:
        host, port = self.endpoint.removeprefix("http://").split(":")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail("the S3 test server exited at start")
            with contextlib.suppress(OSError), socket.create_connection((host, int(port)), 0.5):
                return
            time.sleep(0.1)
        self.stop()
        pytest.fail("the S3 test server did not answer within 30 s")


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_REGION"],
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
