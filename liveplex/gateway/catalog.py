"""`PoolCatalog`: which pool serves a `session.model`, and what that pool serves.

Pure: a value the gateway's view rebuilds from Redis (`le:routes` and each pool's published
`config`) about once a second, so a `Connection` validates a start synchronously, exactly as the
pool's pods would (`gptlive.check_start`). A model with no route goes to the default pool
(`--pool`); a routed pool that has published nothing yet has no engine up: `server_busy`.
A pool's pods may answer to names this gateway sends elsewhere (routed to another pool) or nowhere
(a personaplex pod's own id, which no LiveEngine claims): `advertised` keeps what it describes to a
client to the names that reach the pool, so a session started with any of them is one it accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from liveplex.gptlive import errors
from liveplex.gptlive.served import Served


@dataclass(frozen=True, slots=True)
class PoolCatalog:
    """Routes and served descriptions at one refresh."""

    routes: Mapping[str, str] = field(default_factory=dict)
    """Model name -> pool (`ns/name`), as the operator writes `le:routes`."""
    served: Mapping[str, Served] = field(default_factory=dict)
    """Pool -> its published description; absent while no pod of the pool has written one."""
    default_pool: str | None = None
    """The pool of models that have no route (`liveplex gateway --pool`)."""

    def pool_for(self, model: str) -> str | None:
        """The pool a session of `model` goes to, or None when nothing may serve it."""
        return self.routes.get(model, self.default_pool)

    def served_for(self, model: str) -> Served:
        """`gptlive.Catalog`: raises `model_not_found`, or `server_busy` when no engine is up.

        A routed model is served by its pool (the operator gave the route's names to its pods);
        an unrouted one only when the default pool's pods name it."""
        pool = self.pool_for(model)
        if pool is None:
            raise errors.model_not_found(model, self.models())
        served = self.served.get(pool)
        if served is None:
            raise errors.no_engines()
        return served if model in self.routes else served.served_for(model)

    def advertised(self, pool: str) -> Served | None:
        """The pool's description (`/live/config`) with only the model names that reach it through
        this gateway, in its pods' order, the first as its `model`; None while it has published
        nothing or none of its names reaches it."""
        served = self.served.get(pool)
        reach = [m for m in served.models if self.pool_for(m) == pool] if served is not None else []
        if served is None or not reach:
            return None
        return replace(served, info=replace(served.info, model=reach[0]), aliases=tuple(reach[1:]))

    def models(self) -> tuple[str, ...]:
        """Every model name this gateway serves, routed ones first (`/v1/models`)."""
        names = list(self.routes)
        if self.default_pool is not None and self.default_pool in self.served:
            names += [m for m in self.served[self.default_pool].models if m not in names]
        return tuple(names)

    def pools(self) -> tuple[str, ...]:
        """Every pool a session can go to."""
        pools = dict.fromkeys(self.routes.values())
        if self.default_pool is not None:
            pools[self.default_pool] = None
        return tuple(pools)
