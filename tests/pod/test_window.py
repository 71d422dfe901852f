"""What a pod publishes as `degraded` for a heartbeat window, driven directly."""

from liveplex.pod.stats import Window


def test_late_ticks_over_the_budget_degrade_the_pod() -> None:
    assert Window(tick_p99_us=5000, late_p99_ms=25.0, late_permille=40, ticks=6).degraded(20, sessions=3)
    assert not Window(tick_p99_us=5000, late_p99_ms=5.0, late_permille=0, ticks=6).degraded(20, sessions=3)


def test_an_engine_that_ran_no_tick_while_it_had_sessions_is_degraded_and_an_idle_one_is_not() -> None:
    """A wedged engine call makes no late ticks: it makes none, so lateness alone never said so."""
    stalled = Window(tick_p99_us=0, late_p99_ms=0.0, late_permille=0, ticks=0)
    assert stalled.degraded(20, sessions=1)
    assert not stalled.degraded(20, sessions=0)  # idle: the engine ticks only with sessions
