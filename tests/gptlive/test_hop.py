"""The hop's private events, encoded and decoded by `hop` alone: what a pod writes is what a gateway reads."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex.gptlive.server import hop


@given(st.binary(max_size=4096))
def test_a_checkpoint_event_is_json_of_its_type_and_gives_back_its_bytes(data: bytes) -> None:
    text = hop.checkpoint_event(data)
    assert text.startswith(hop.CHECKPOINT_PREFIX)  # how gateways find it without parsing
    body = orjson.loads(text)
    assert body["type"] == hop.CHECKPOINT and set(body) == {"type", "data"}
    assert hop.checkpoint_data(text) == data


@pytest.mark.parametrize("text", [
    hop.CHECKPOINT_PREFIX + 'no base64!"}',
    hop.CHECKPOINT_PREFIX + 'AAAA"',  # cut short: the data is not followed by the event's end
    hop.CHECKPOINT_PREFIX + 'AAAA","more":1}',  # another field after the data
])
def test_a_checkpoint_not_as_a_pod_writes_it_is_refused(text: str) -> None:
    with pytest.raises(ValueError):  # any: the gateway then forgets the record as unreadable
        hop.checkpoint_data(text)


def test_the_move_request_is_json_of_its_type() -> None:
    assert orjson.loads(hop.MOVE_REQUEST) == {"type": hop.MOVE_REQUESTED}
