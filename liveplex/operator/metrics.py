"""The operator's own Prometheus series: handler runs by outcome and duration, LiveEngines by
phase, and whether this replica leads; served on `--metrics-port` with `/healthz`.

Handlers are counted by wrapping them (`instrumented`), so the handlers stay free of metrics code
and a handler added later is counted by registering it the same way. A LiveEngine's phase is the
one its last handler run saw or wrote; one no handler has seen for `stale_after_s` (deleted, or
another replica leads now) is no longer counted.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf
from aiohttp import web
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from liveplex.gptlive.server import exposition
from liveplex.live.buckets import Buckets
from liveplex.operator import crd

logger = logging.getLogger(__name__)

DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
OUTCOMES = ("ok", "retry", "invalid", "error")
"""ok: returned; retry: kopf retries it later (a transient API failure, a refused child);
invalid: given up on (an invalid spec); error: an unexpected exception (a bug, kopf retries)."""
HANDLERS = ("reconcile", "status")


def outcome(exc: BaseException | None) -> str:
    """A handler run's outcome from what it raised."""
    if exc is None:
        return "ok"
    if isinstance(exc, kopf.PermanentError):
        return "invalid"
    if isinstance(exc, kopf.TemporaryError):
        return "retry"
    return "error"


@dataclass(slots=True)
class OperatorMetrics:
    """Plain counters the handlers' wrapper writes and the collector reads at scrape time."""

    stale_after_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    runs: dict[tuple[str, str], int] = field(default_factory=lambda: {(h, o): 0 for h in HANDLERS for o in OUTCOMES})
    seconds: dict[str, Buckets] = field(default_factory=lambda: {h: Buckets(DURATION_BUCKETS_S) for h in HANDLERS})
    phases: dict[str, tuple[str, float]] = field(default_factory=dict)
    """`namespace/name` → (phase, when last seen)."""
    leader: bool = False

    def observe(self, handler: str, exc: BaseException | None, seconds: float) -> None:
        key = (handler, outcome(exc))
        self.runs[key] = self.runs.get(key, 0) + 1
        self.seconds.setdefault(handler, Buckets(DURATION_BUCKETS_S)).observe(seconds)

    def saw(self, liveengine: str, phase: str | None) -> None:
        if phase:
            self.phases[liveengine] = (phase, self.clock())

    def by_phase(self) -> dict[str, int]:
        """Every phase (from 0) with the LiveEngines in it; forgets the stale ones."""
        now = self.clock()
        for key in [k for k, (_, seen) in self.phases.items() if now - seen > self.stale_after_s]:
            del self.phases[key]
        counts = dict.fromkeys(crd.PHASES, 0)
        for phase, _ in self.phases.values():
            counts[phase] = counts.get(phase, 0) + 1
        return counts


class OperatorCollector(Collector):
    def __init__(self, metrics: OperatorMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        runs = CounterMetricFamily("liveplex_operator_reconciles", "Handler runs by handler and outcome.",
                                   labels=["handler", "outcome"])
        for (handler, result), n in sorted(m.runs.items()):
            runs.add_metric([handler, result], n)
        yield runs
        yield exposition.histograms("liveplex_operator_reconcile_duration_seconds",
                                    "Time one handler run took, Kubernetes and Redis calls included.", "handler",
                                    m.seconds)
        phases = GaugeMetricFamily("liveplex_operator_liveengines", "LiveEngines by status phase.", labels=["phase"])
        for phase, n in m.by_phase().items():
            phases.add_metric([phase], n)
        yield phases
        yield GaugeMetricFamily("liveplex_operator_leader", "1 while this replica holds the leader Lease.",
                                value=int(m.leader))


Handler = Callable[..., Awaitable[None]]


def instrumented(metrics: OperatorMetrics, name: str, handler: Handler) -> Handler:
    """`handler` counted and timed under `name`, and the phase its LiveEngine is left in recorded."""

    @functools.wraps(handler)
    async def run(body: Mapping[str, Any], patch: kopf.Patch, **kwargs: Any) -> None:
        started = time.perf_counter()
        raised: BaseException | None = None
        try:
            await handler(body=body, patch=patch, **kwargs)
        except Exception as exc:
            raised = exc
            raise
        finally:
            metrics.observe(name, raised, time.perf_counter() - started)
            meta = body["metadata"]
            phase = (patch.get("status") or {}).get("phase") or (body.get("status") or {}).get("phase")
            metrics.saw(f"{meta['namespace']}/{meta['name']}", phase)

    return run


async def serve(metrics: OperatorMetrics, host: str, port: int) -> web.AppRunner:
    """`/metrics` and `/healthz` (the event loop answers: a standby replica is alive too); the
    runner to clean up. Port 0 binds a free port (the runner's addresses say which)."""
    registry = exposition.registry(OperatorCollector(metrics))

    async def scrape(_: web.Request) -> web.Response:
        return web.Response(body=exposition.render(registry), headers={"Content-Type": exposition.CONTENT_TYPE})

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"leader": metrics.leader})

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    app.router.add_get("/healthz", health)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    logger.info("metrics listening", extra={"addresses": [str(a) for a in runner.addresses]})
    return runner
