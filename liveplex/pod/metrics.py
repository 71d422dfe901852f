"""Prometheus exposition of a pod's `PodSnapshot` (platform §9 names).

A custom collector takes one snapshot per scrape, so nothing on the tick or frame path touches
prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from liveplex.gptlive.server.exposition import histogram
from liveplex.pod.pause import PauseSnapshot
from liveplex.pod.stats import PARKED_ENDS, REATTACH_RESULTS, PodSnapshot


def _labelled(name: str, doc: str, label: str, counts: dict[str, int],
              exported: tuple[str, ...] = ()) -> CounterMetricFamily:
    """A counter per value of `label`; the `exported` values from 0."""
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, value in sorted({**dict.fromkeys(exported, 0), **counts}.items()):
        family.add_metric([key], value)
    return family


class PodCollector(Collector):
    """Reads one snapshot on every scrape."""

    def __init__(self, read: Callable[[], PodSnapshot]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        s = self._read()
        f = s.front
        yield InfoMetricFamily("liveplex_engine", "What the engine serves and how it runs.",
                               value={"model": s.info.model, **dict(s.info.engine)})
        yield GaugeMetricFamily("liveplex_engine_session_capacity", "Advertised capacity.",
                                value=s.info.max_sessions)
        yield GaugeMetricFamily("liveplex_engine_sockets_open", "Open WebSockets.", value=f.sockets_open)
        yield GaugeMetricFamily("liveplex_engine_ready", "1 when the engine serves.", value=int(s.ready))
        yield GaugeMetricFamily("liveplex_engine_draining", "1 while the pod drains.", value=int(s.draining))
        yield GaugeMetricFamily("liveplex_engine_model_load_seconds", "Time the engine took to load.",
                                value=s.model_load_s)
        yield CounterMetricFamily("liveplex_engine_sessions_accepted", "Sessions started.", value=f.accepted)
        yield _labelled("liveplex_engine_sessions_rejected", "Refused starts by reason.", "reason", f.rejected)
        yield _labelled("liveplex_engine_sessions_closed", "Ended sessions by reason.", "reason", f.closed)
        yield _labelled("liveplex_engine_errors", "Error events sent, by code.", "code", f.errors)
        yield _labelled("liveplex_engine_connections_dropped", "Connections the pod cut, by reason.", "reason",
                        f.dropped)
        yield CounterMetricFamily("liveplex_engine_underruns", "Jitter-buffer dry spells.", value=f.underruns)
        yield CounterMetricFamily("liveplex_engine_dropped_samples", "Caller samples dropped by the jitter cap.",
                                  value=f.dropped_samples)
        yield histogram("liveplex_engine_session_duration_seconds", "Session lifetime.", f.session_seconds)
        yield histogram("liveplex_engine_session_start_seconds", "From session.start to session.started.",
                        f.start_seconds)
        yield histogram("liveplex_engine_first_audio_seconds", "From session.start to the first audio delta.",
                        f.first_audio_seconds)
        yield GaugeMetricFamily("liveplex_engine_sessions_active", "Running sessions.", value=s.sessions)
        yield GaugeMetricFamily("liveplex_engine_sessions_reserved",
                                "Sessions placed on this pod and not started yet (last heartbeat).",
                                value=s.reserved)
        yield CounterMetricFamily("liveplex_engine_ticks", "Ticks run.", value=s.ticks)
        yield CounterMetricFamily("liveplex_engine_ticks_skipped", "Tick slots skipped after overruns.",
                                  value=s.late_ticks)
        yield CounterMetricFamily("liveplex_engine_ticks_late",
                                  f"Ticks run more than {s.lateness_budget_ms} ms late.", value=s.ticks_late)
        yield CounterMetricFamily("liveplex_engine_tick_busy_seconds", "Cumulative tick compute.",
                                  value=s.busy_us / 1e6)
        yield histogram("liveplex_engine_tick_duration_seconds", "Compute time per tick.", s.duration)
        yield histogram("liveplex_engine_tick_lateness_seconds", "Tick start minus its due time.", s.lateness)
        yield histogram("liveplex_engine_batch_size", "Sessions per tick.", s.batch)
        yield GaugeMetricFamily("liveplex_engine_tick_groups", "Tick groups the engine runs now (issue 44).",
                                value=s.tick_groups)
        yield CounterMetricFamily("liveplex_engine_regroups", "Changes of the tick groups the engine runs.",
                                  value=s.regroups)
        yield histogram("liveplex_engine_caller_wait_seconds",
                        "How long each played caller frame waited, from its arrival to its tick's due time.",
                        s.caller_wait)
        yield histogram("liveplex_engine_prefill_duration_seconds", "Prefill time per batch of newcomers.",
                        s.prefill)
        parking = s.parking
        yield GaugeMetricFamily("liveplex_engine_sessions_parked",
                                "Relayed sessions kept for their caller to re-attach (their gateway went away).",
                                value=parking.parked)
        yield _labelled("liveplex_engine_reattaches", "Sessions continued on a re-attaching socket, by result.",
                        "result", parking.reattaches, REATTACH_RESULTS)
        yield _labelled("liveplex_engine_parked_ended", "Parked sessions that ended with no caller back, by reason.",
                        "reason", parking.parked_ended, PARKED_ENDS)
        yield histogram("liveplex_engine_reattach_gap_seconds",
                        "From a session's park to its re-attach (the audio made meanwhile is not replayed).",
                        parking.gap)
        yield from _pause_metrics(s.pause)
        if s.kv_occupancy is not None:
            yield GaugeMetricFamily("liveplex_engine_kv_occupancy_ratio",
                                    "KV-cache positions held by running sessions / positions allocated.",
                                    value=s.kv_occupancy)


def _pause_metrics(p: PauseSnapshot) -> Iterator[Metric]:
    """The idle pause (docs/pause.md): sessions out of the engine by state, what pauses and wakes
    did, and the bytes held for the paused."""
    out = GaugeMetricFamily("liveplex_engine_sessions_out", "Sessions held out of the engine's batch, by state.",
                            labels=["state"])
    out.add_metric(["paused"], p.paused - p.waiting)
    out.add_metric(["waiting"], p.waiting)
    yield out
    yield CounterMetricFamily("liveplex_engine_pauses", "Sessions taken out of the batch for their caller's silence.",
                              value=p.pauses)
    yield CounterMetricFamily("liveplex_engine_wakes", "Paused or waiting sessions woken by speech.", value=p.wakes)
    yield CounterMetricFamily("liveplex_engine_wakes_refused", "Wakes that found no free engine slot (must stay 0).",
                              value=p.refused_wakes)
    yield GaugeMetricFamily("liveplex_engine_parked_bytes", "Bytes of paused sessions' state held in the pod's memory.",
                            value=p.parked_bytes)
    yield histogram("liveplex_engine_wake_latency_seconds",
                    "From the waking frame's arrival to the woken session running again.", p.wake)
