"""A real S3-compatible server for tests: moto's server mode in a thread of the test process, on a
free port, with a bucket made for the test (moto takes any credentials; boto's and obstore's
signing still runs)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
from moto.server import ThreadedMotoServer

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "liveplex-test", "AWS_SECRET_ACCESS_KEY": "liveplex-test-secret",
               "AWS_REGION": "us-east-1"}
"""What the store's client reads from the environment (the chart's Secret, in a cluster)."""


@dataclass(frozen=True)
class S3:
    endpoint: str
    _moto: ThreadedMotoServer

    def stop(self) -> None:
        """The store goes down (a test of what a call does then); stopping twice is no error."""
        self._moto.stop()

    def bucket(self) -> str:
        """A new, empty bucket."""
        name = f"liveplex-{uuid.uuid4().hex[:12]}"
        httpx.put(f"{self.endpoint}/{name}").raise_for_status()
        return name


@contextlib.contextmanager
def server() -> Iterator[S3]:
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    try:
        host, port = moto.get_host_and_port()
        yield S3(f"http://{host}:{port}", moto)
    finally:
        with contextlib.suppress(Exception):
            moto.stop()
