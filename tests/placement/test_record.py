"""`PodRecord` <-> pod hash: lossless both ways, and a clear refusal for anything a writer would not write."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex.placement import InvalidRecord, PodRecord

COUNTS = st.integers(min_value=0, max_value=2**53)
RECORDS = st.builds(PodRecord, addr=st.text(), capacity=COUNTS, active=COUNTS, draining=st.booleans(),
                    degraded=st.booleans(), tick_p99_us=COUNTS, late_permille=COUNTS, engine_version=st.text(),
                    started_ms=COUNTS, paused=COUNTS)


@given(RECORDS)
def test_a_record_survives_the_hash_round_trip(record: PodRecord) -> None:
    assert PodRecord.from_hash(record.to_hash()) == record


def test_the_hash_holds_the_fields_place_lua_reads_as_decimal_and_flags() -> None:
    fields = PodRecord("10.0.0.7:8000", capacity=64, active=3, draining=True).to_hash()
    assert {k: fields[k] for k in ("addr", "capacity", "active", "draining", "degraded")} == {
        "addr": "10.0.0.7:8000", "capacity": "64", "active": "3", "draining": "1", "degraded": "0"}
    assert set(fields) == {"addr", "capacity", "active", "draining", "degraded", "tick_p99_us", "late_permille",
                           "late_p99_us", "engine_version", "started_ms", "paused"}


@pytest.mark.parametrize(("field", "value"), [("capacity", "x"), ("active", "-1"), ("draining", "yes"),
                                              ("degraded", "2"), ("started_ms", "1.5")])
def test_a_malformed_field_is_refused_by_name(field: str, value: str) -> None:
    fields = PodRecord("a:1", 1, 0).to_hash() | {field: value}
    with pytest.raises(InvalidRecord) as raised:
        PodRecord.from_hash(fields)
    assert raised.value.param == field


def test_a_missing_field_is_refused_by_name() -> None:
    fields = PodRecord("a:1", 1, 0).to_hash()
    del fields["capacity"]
    with pytest.raises(InvalidRecord) as raised:
        PodRecord.from_hash(fields)
    assert raised.value.param == "capacity"


def test_an_older_pods_hash_without_the_paused_count_reads_as_none_paused() -> None:
    """A rollout: gateways that read `paused` before every pod writes it (`record.ADDED`)."""
    fields = PodRecord("a:1", 8, 3, paused=2).to_hash()
    assert PodRecord.from_hash(fields).paused == 2
    del fields["paused"]
    assert PodRecord.from_hash(fields) == PodRecord("a:1", 8, 3)
