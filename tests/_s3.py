"""An S3-compatible HTTP server on loopback for the tiered-storage tests: moto's server
mode (``moto[server]``), started in-process on a free port. Credentials are moto's
dummies, exported in the environment so the broker subprocesses inherit them."""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Iterator

import boto3
from moto.server import ThreadedMotoServer

__all__ = ["S3Server", "s3_server"]

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class S3Server:
    """One moto server; ``bucket()`` makes a fresh bucket and returns its ``s3://`` URL."""

    def __init__(self) -> None:
        os.environ.update(CREDENTIALS)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.running = True

    def client(self) -> object:
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")

    def bucket(self, prefix: str = "tier") -> str:
        name = f"seglog-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)  # type: ignore[attr-defined]
        return f"s3://{name}/{prefix}"

    def stop(self) -> None:
        if self.running:
            self._server.stop()
            self.running = False


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    server = S3Server()
    try:
        yield server
    finally:
        server.stop()
