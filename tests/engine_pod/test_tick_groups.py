"""PersonaPlex tick groups (issue 44): a move between groups is a copy of the session's rows, bit-exact
against a twin that never moved; regrouping as G changes and sessions come and go drops and repeats
no frame. The tiny model on the CPU, stepped by hand through the real channel (`harness`)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from liveplex.engine_pod import leases
from liveplex.live import contract, groups
from tests.engine_pod import harness

A = ("NATF2", harness.SHORT_ROLE)
TICKS = 24


def test_a_session_moved_to_another_group_is_bit_exact_against_its_twin(tiny_model) -> None:
    """Twins start together in group 0 of two; after 8 periods one moves to group 1 (its rows
    copied to that group's slots, run by that group's program), and back after 16: same tokens,
    the same PCM bit for bit, one frame a period throughout."""
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=4, tick_groups=2))
    audio = harness.caller_audio(16, TICKS)
    a, b = pod.start(*A, audio), pod.start(*A, audio)
    eng = pod.engine
    for t in range(TICKS):
        if t in (8, 16):
            src = eng.group_of(a.opened.id)
            assert src is not None
            found = eng._find(a.opened.id)
            assert found is not None
            eng._move(found[0], found[1], eng._groups[1 - src])
            assert eng.group_of(a.opened.id) == 1 - src and eng.group_of(b.opened.id) == 0
        pod.tick()
    assert a.tokens == b.tokens and a.pcm == b.pcm and a.text == b.text and len(a.pcm) == TICKS
    assert [o.frame for o in a.outputs if isinstance(o, contract.Audio)] == list(range(TICKS))


def test_a_startup_measure_too_slow_gives_way_to_the_steps_the_engine_runs(tiny_model) -> None:
    """A step measured at startup while another process held the core (here: 50 ms, where two
    turns do not fit the period) keeps one group only until the engine has run its own steps:
    their median replaces it and G grows again, held `UP_PERIODS` periods first."""
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=4, tick_groups=0))
    eng = pod.engine
    eng._ticks = groups.Steps(dict.fromkeys(eng._buckets, 0.05))
    pod.start(*A, harness.caller_audio(0, 40))
    pod.tick()
    assert eng.tick_groups == 1 and eng._pulse.groups_reason.startswith("1 x 50.0 ms")
    for _ in range(groups.TRUST_STEPS + groups.UP_PERIODS):
        pod.tick()
    assert eng._ticks[1] < 0.05 and eng.tick_groups > 1 and eng._pulse.regroups == 2


def test_each_g_is_priced_at_the_buckets_its_own_groups_run(tiny_model) -> None:
    """Six slots: one group cuts its buckets at 6 (1, 2, 4, 6), two groups at 3 (1, 2, 3). Three
    rows run bucket 4 in the one group and bucket 3 in each of two: the rule weighs each G at
    what it would run, not at the smallest bucket any layout has."""
    eng = harness.Pod(*harness.build(tiny_model, max_sessions=6, tick_groups=0)).engine
    eng._ticks = groups.Steps({b: b / 1e3 for b in eng._buckets})
    assert 3 in eng._buckets  # a bucket the one group does not have
    assert (eng._step_s(1, 3), eng._step_s(2, 3)) == (0.004, 0.003)
    assert eng._step_s(8, 1) == float("inf")  # more groups than slots: never chosen


OPS = st.lists(st.sampled_from(["start", "hang_up", "regroup_1", "regroup_2", "regroup_4", "tick"]),
               min_size=6, max_size=18)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_regrouping_as_sessions_come_and_go_drops_and_repeats_no_frame(tiny_model, ops: list[str]) -> None:
    """A script of arrivals, hang-ups and changes of G (the engine's `_regroup`, which `_choose`
    calls when the measured rule changes its mind), a period after each: every session's frames
    are 0, 1, 2... one a period while it runs, and the position in its slot is its own (no rows crossed)."""
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=4, tick_groups=0))
    eng = pod.engine
    started: dict[int, int] = {}
    for period, op in enumerate([*ops, "tick", "tick"]):
        live = [c for c in pod.calls if c.closed is None and not c.opened.audio.closed]
        if op == "start" and eng.sessions() < 4:
            call = pod.start(*A, harness.caller_audio(len(pod.calls), 40))
            started[call.opened.id] = period
        elif op == "hang_up" and live:
            live[0].opened.audio.close()
        elif op.startswith("regroup") and not eng.waiting:
            G = int(op[-1])
            if G in eng._layouts:
                eng._regroup(G)
                eng._pulse.tick_groups = G
        pod.tick()
        for c in pod.calls:
            got = [o.frame for o in c.outputs if isinstance(o, contract.Audio)]
            assert got == list(range(len(got)))  # in order, none dropped, none twice
            found = eng._find(c.opened.id)
            if c.closed is None and found is not None:
                assert len(got) == period - started[c.opened.id] + 1  # one a period since its start
                group, i = found  # its rows went where it went: the device's position is the host's
                assert int(eng.pools.tokens.pos[group.base + i]) == group.rows[i].pos


@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.permutations(range(n)), st.just(n))))
def test_permute_takes_every_slot_where_it_goes_through_one_spare(case: tuple[list[int], int]) -> None:
    """`leases.permute`, played on a list of labels: each slot's content ends at its destination,
    cycles included (through the spare)."""
    perm, _ = case
    dst_of = dict(enumerate(perm))
    spare = len(perm)
    slots: list[int | None] = [*range(len(perm)), None]
    for move in leases.permute(dst_of, spare):
        slots[move.dst] = slots[move.src]  # a copy: a slot overwritten before it was read loses a label
    assert [slots[perm[s]] for s in range(len(perm))] == list(range(len(perm)))
