"""le:routes: the older claimant keeps a contested model, out-of-scope routes are left alone, stale ones go."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from liveplex.operator import routes
from liveplex.operator.routes import Claim

OLD = Claim("voice/pp", "2026-01-01T00:00:00Z", ("gpt-live-1", "pp-7b"))
YOUNG = Claim("voice/pp2", "2026-02-01T00:00:00Z", ("gpt-live-1", "other"))


def test_the_older_claimant_keeps_a_contested_model_and_the_younger_loses_it() -> None:
    r = routes.resolve([YOUNG, OLD], {}, ())
    assert r.routes == {"gpt-live-1": "voice/pp", "pp-7b": "voice/pp", "other": "voice/pp2"}
    assert r.lost == {"voice/pp2": ("gpt-live-1",)}


def test_equal_ages_are_broken_by_pool_name() -> None:
    a, b = Claim("a/x", "2026-01-01T00:00:00Z", ("m",)), Claim("b/x", "2026-01-01T00:00:00Z", ("m",))
    assert routes.resolve([b, a], {}, ()).lost == {"b/x": ("m",)}


def test_a_route_outside_the_watched_namespaces_counts_as_the_oldest_claim() -> None:
    r = routes.resolve([OLD], {"gpt-live-1": "lab/sim"}, ("voice",))
    assert r.lost == {"voice/pp": ("gpt-live-1",)} and r.routes == {"pp-7b": "voice/pp"}
    ch = routes.changes({"gpt-live-1": "lab/sim"}, r, ("voice",))
    assert ch.set_ == {"pp-7b": "voice/pp"} and ch.delete == ()


def test_routes_in_scope_that_nobody_claims_are_deleted() -> None:
    current = {"gone": "voice/deleted", "pp-7b": "voice/pp", "gpt-live-1": "voice/pp", "elsewhere": "lab/x"}
    ch = routes.changes(current, routes.resolve([OLD], current, ("voice",)), ("voice",))
    assert ch.set_ == {} and ch.delete == ("gone",)


def test_clusterwide_every_route_is_in_scope() -> None:
    current = {"gpt-live-1": "lab/sim"}
    r = routes.resolve([OLD], current, ())
    assert r.routes["gpt-live-1"] == "voice/pp"
    assert routes.changes(current, r, ()).set_ == {"gpt-live-1": "voice/pp", "pp-7b": "voice/pp"}


def test_no_changes_once_written() -> None:
    r = routes.resolve([OLD, YOUNG], {}, ())
    assert not routes.changes(dict(r.routes), r, ())


def test_a_split_pool_routes_with_its_sub_pool_count_and_a_new_count_is_a_changed_route() -> None:
    split = Claim("voice/pp", "2026-01-01T00:00:00Z", ("pp-7b",), subpools=4)
    r = routes.resolve([split], {"pp-7b": "voice/pp"}, ())
    assert r.routes == {"pp-7b": "voice/pp*4"}
    assert routes.changes({"pp-7b": "voice/pp"}, r, ()).set_ == {"pp-7b": "voice/pp*4"}
    assert routes.changes({"pp-7b": "voice/pp*4"}, routes.resolve([OLD], {}, ("voice",)), ("voice",)).set_ == {
        "pp-7b": "voice/pp", "gpt-live-1": "voice/pp"}, "back to one pool: the plain name again"


def test_a_liveengines_model_name_is_routed_to_it_and_an_older_holder_of_it_is_no_conflict() -> None:
    stable = Claim("voice/pp", "2026-01-01T00:00:00Z", ("gpt-live-1",), name="pp-7b-v1")
    canary = Claim("voice/canary", "2026-02-01T00:00:00Z", ("canary",), name="pp-7b-v1")
    r = routes.resolve([canary, stable], {}, ())
    assert r.routes == {"gpt-live-1": "voice/pp", "pp-7b-v1": "voice/pp", "canary": "voice/canary"}
    assert r.lost == {}, "the canary's name already reaches a pool that serves it"
    late = Claim("voice/late", "2026-03-01T00:00:00Z", ("pp-7b-v1",), name="late")
    assert routes.resolve([late, stable], {}, ()).lost == {"voice/late": ("pp-7b-v1",)}, "a served model it lost is"
    assert routes.resolve([Claim("voice/pp", "2026-01-01T00:00:00Z", ("m",), subpools=2, name="m")], {}, ()) \
        .routes == {"m": "voice/pp*2"}, "a name among its own served models is routed once"


_claims = st.lists(st.builds(lambda i, day, models: Claim(f"ns/e{i}", f"2026-01-{day:02d}T00:00:00Z", models),
                             st.integers(0, 9), st.integers(1, 28),
                             st.lists(st.sampled_from("abcd"), unique=True).map(tuple)),
                   unique_by=lambda c: c.pool, max_size=6)


@given(_claims)
def test_each_model_has_one_winner_the_oldest_claimant(claims: list[Claim]) -> None:
    r = routes.resolve(claims, {}, ())
    for model in {m for c in claims for m in c.models}:
        oldest = min((c for c in claims if model in c.models), key=lambda c: (c.created, c.pool))
        assert r.routes[model] == oldest.pool
        assert all(model in r.lost.get(c.pool, ()) for c in claims if model in c.models and c is not oldest)
