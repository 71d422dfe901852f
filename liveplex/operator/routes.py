"""`le:routes` resolution: which pool serves each model name, and who lost a contested one.

Model names are global. Every LiveEngine claims its `spec.model.servedModels` and its
`spec.model.name` (what its MODEL column and its pods' `/live/config` advertise, so a session can
start with it through a gateway); the oldest claimant (by `creationTimestamp`, then by pool name)
keeps a contested name. A younger claimant of a served model gets `Ready=False,
reason=RouteConflict` (platform §4 rule 8); one whose `name` an older LiveEngine holds does not: the
name already routes to a pool that serves a model so named (several pools of one model, a canary
beside a stable one, are a valid setup). An operator watching only some namespaces cannot see the
other claimants, so a route it finds pointing outside its scope counts as the oldest claim and is
left alone; routes inside its scope that no claimant holds any more (the LiveEngine was deleted or
stopped serving the name) are deleted. A route's value names the pool and, for a pool split into
sub-pools, their count (`subpools.route`): a gateway learns both from it, and a changed count is a
changed route, rewritten. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from liveplex.placement import subpools


@dataclass(frozen=True, slots=True)
class Claim:
    """A LiveEngine's claim: its pool (`<ns>/<name>`), its age and the names it serves."""

    pool: str
    created: str
    models: tuple[str, ...]
    """`spec.model.servedModels`: losing one to an older claimant is a conflict."""
    subpools: int = 1
    """`spec.placement.subPools`: part of the route's value."""
    name: str | None = None
    """`spec.model.name`: routed here unless an older claimant holds it, which is no conflict."""


@dataclass(frozen=True, slots=True)
class Resolution:
    routes: Mapping[str, str]
    """Model name -> route (the pool, with its sub-pool count when split), for every name a claimant
    in scope won."""
    lost: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Pool -> the model names it claimed and lost, sorted."""


@dataclass(frozen=True, slots=True)
class Changes:
    set_: Mapping[str, str]
    delete: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.set_ or self.delete)


def in_scope(pool: str, namespaces: Collection[str]) -> bool:
    """Whether an operator watching `namespaces` (empty: all) owns routes to `pool`."""
    return not namespaces or pool.split("/", 1)[0] in namespaces


def resolve(claims: Iterable[Claim], current: Mapping[str, str], namespaces: Collection[str]) -> Resolution:
    """Winners among `claims` (all in scope); `current` is le:routes as read."""
    foreign = {model: pool for model, pool in current.items() if not in_scope(pool, namespaces)}
    routes: dict[str, str] = {}
    lost: dict[str, list[str]] = {}
    for claim in sorted(claims, key=lambda c: (c.created, c.pool)):
        route = subpools.route(claim.pool, claim.subpools)
        for model in claim.models:
            if model in foreign or model in routes:
                lost.setdefault(claim.pool, []).append(model)
            else:
                routes[model] = route
        if claim.name is not None and claim.name not in foreign and claim.name not in routes:
            routes[claim.name] = route
    return Resolution(routes, {pool: tuple(sorted(models)) for pool, models in lost.items()})


def changes(current: Mapping[str, str], resolution: Resolution, namespaces: Collection[str]) -> Changes:
    """The writes that turn `current` into the resolution, touching only routes in scope."""
    set_ = {model: pool for model, pool in sorted(resolution.routes.items()) if current.get(model) != pool}
    delete = tuple(sorted(model for model, pool in current.items()
                          if in_scope(pool, namespaces) and model not in resolution.routes))
    return Changes(set_, delete)
