from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import s3


@pytest.fixture(scope="module")
def s3_server() -> Iterator[s3.S3]:
    with s3.server() as running:
        yield running


@pytest.fixture
def s3_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3.CREDENTIALS.items():
        monkeypatch.setenv(name, value)
