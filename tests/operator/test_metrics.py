"""The operator's `/metrics`: handler runs counted by outcome and timed, LiveEngines by phase
(stale ones forgotten), the leader gauge; served over real HTTP with `/healthz`."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path
from typing import Any

import kopf
import pytest
from prometheus_client.parser import text_string_to_metric_families

from liveplex.gptlive.server import exposition
from liveplex.operator import metrics

BODY = {"metadata": {"namespace": "voice", "name": "pp"}, "status": {"phase": "Pending"}}


def _samples(m: metrics.OperatorMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = exposition.render(exposition.registry(metrics.OperatorCollector(m))).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _run(handler: Any, m: metrics.OperatorMetrics, name: str = "reconcile") -> kopf.Patch:
    patch = kopf.Patch()
    asyncio.run(metrics.instrumented(m, name, handler)(body=BODY, patch=patch, retry=0))
    return patch


@pytest.mark.parametrize(("raised", "outcome"), [
    (None, "ok"), (kopf.TemporaryError("api down"), "retry"), (kopf.PermanentError("bad spec"), "invalid"),
    (RuntimeError("bug"), "error")])
def test_each_run_is_counted_by_outcome_and_timed(raised: Exception | None, outcome: str) -> None:
    m = metrics.OperatorMetrics()

    async def handler(**_: Any) -> None:
        if raised is not None:
            raise raised

    if raised is None:
        _run(handler, m)
    else:
        with pytest.raises(type(raised)):
            _run(handler, m)
    samples = _samples(m)
    runs = {labels: v for (name, labels), v in samples.items() if name == "liveplex_operator_reconciles_total"}
    assert runs[(("handler", "reconcile"), ("outcome", outcome))] == 1
    assert sum(runs.values()) == 1 and len(runs) == len(metrics.HANDLERS) * len(metrics.OUTCOMES)  # all from 0
    count = samples[("liveplex_operator_reconcile_duration_seconds_count", (("handler", "reconcile"),))]
    assert count == 1 and samples[("liveplex_operator_reconcile_duration_seconds_count", (("handler", "status"),))] == 0


def test_the_phase_a_handler_writes_wins_over_the_one_it_read_and_stale_ones_are_forgotten() -> None:
    now = [0.0]
    m = metrics.OperatorMetrics(stale_after_s=30, clock=lambda: now[0])

    async def writes_ready(patch: kopf.Patch, **_: Any) -> None:
        patch.status["phase"] = "Ready"

    async def writes_nothing(**_: Any) -> None:
        return None

    _run(writes_ready, m, "status")
    phases = {dict(labels)["phase"]: v for (name, labels), v in _samples(m).items()
              if name == "liveplex_operator_liveengines"}
    assert phases == {"Pending": 0, "Progressing": 0, "Ready": 1, "Degraded": 0, "Failed": 0}
    _run(writes_nothing, m, "status")  # the body's phase when the handler wrote none
    assert m.by_phase()["Pending"] == 1 and m.by_phase()["Ready"] == 0
    now[0] = 31.0
    assert sum(m.by_phase().values()) == 0


def test_metrics_and_healthz_are_served() -> None:
    async def run() -> tuple[str, str]:
        m = metrics.OperatorMetrics(leader=True)
        runner = await metrics.serve(m, "127.0.0.1", 0)
        try:
            port = runner.addresses[0][1]
            get = lambda path: urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).read().decode()  # noqa: E731
            return await asyncio.to_thread(get, "/metrics"), await asyncio.to_thread(get, "/healthz")
        finally:
            await runner.cleanup()

    text, health = asyncio.run(run())
    assert "liveplex_operator_leader 1.0" in text and health == '{"leader": true}'


def test_every_operator_metric_has_its_row_in_docs_observability() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    families = {f.name for f in metrics.OperatorCollector(metrics.OperatorMetrics()).collect()}
    assert families and not [name for name in families if f"| `{name}" not in doc]  # counters add `_total`
