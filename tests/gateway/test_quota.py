"""Per-key limits, driven directly: time is an argument."""

from __future__ import annotations

from liveplex.gateway.quota import Quota

S = 1_000_000_000


def test_concurrent_sessions_per_key_are_capped_and_come_back_when_one_ends() -> None:
    quota = Quota(max_sessions=2, starts_per_s=0)
    assert quota.admit("a", 0) is None and quota.admit("a", 0) is None
    refused = quota.admit("a", 0)
    assert refused is not None and refused.code.value == "server_busy" and "2 live sessions" in refused.message
    assert quota.admit("b", 0) is None  # another key is not affected
    quota.release("a")
    assert quota.admit("a", 0) is None


def test_starts_are_metered_per_key_with_a_seconds_burst() -> None:
    quota = Quota(max_sessions=0, starts_per_s=5)
    assert all(quota.admit("a", 0) is None for _ in range(5))  # a second's worth at once
    refused = quota.admit("a", 0)
    assert refused is not None and "5 sessions a second" in refused.message
    assert quota.admit("b", 0) is None
    assert quota.admit("a", S // 5) is None  # one token back after a fifth of a second
    assert quota.admit("a", S // 5) is not None
    admitted = sum(quota.admit("a", S + i * S // 100) is None for i in range(300))  # 3 s of a flood
    assert 17 <= admitted <= 20  # 4 tokens banked since 0.2 s, then the rate (15 in 3 s), not the flood


def test_a_refused_start_takes_no_session_and_idle_buckets_are_forgotten() -> None:
    quota = Quota(max_sessions=1, starts_per_s=1)
    assert quota.admit("a", 0) is None
    assert quota.admit("a", 0) is not None  # over the session limit: no token spent either
    quota.release("a")
    for i in range(100):
        key = f"k{i}"
        assert quota.admit(key, i * S) is None
        quota.release(key)
    assert len(quota._buckets) <= 18 and not quota._sessions


def test_a_session_continued_here_counts_against_its_key_unrefused_and_unmetered() -> None:
    """A re-attach after a rollout: the call is held whatever the limits (refusing it would drop
    a live call), but a new start of the same key then meets the limit the held call fills."""
    quota = Quota(max_sessions=1, starts_per_s=1)
    quota.hold("a")
    quota.hold("a")  # over the limit already: still held
    refused = quota.admit("a", 0)
    assert refused is not None and "1 live sessions" in refused.message
    quota.release("a")
    quota.release("a")
    assert quota.admit("a", 0) is None  # the start token was never spent by the holds
