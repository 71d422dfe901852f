"""The alerts a liveplex installation ships (a Prometheus rule file and the chart's `PrometheusRule`),
written once as data.

Each `Alert` is a *signal* (a PromQL expression that yields a series per affected thing whenever the
platform runs), a comparison that turns it into the alert, how long it must hold, and what it asks
of whoever is paged. Keeping the signal apart is what lets a test prove every alert against a real
Prometheus scraping real pods (the signal returns series) and fire each one on synthetic series
(`promtool test rules`), without waiting for a real incident.

Label conventions are `signals`': every series about a LiveEngine carries `liveengine` as
`<namespace>/<name>`; `pod` and `namespace` are the scraped pod's (the target's labels, which no
liveplex series overwrites). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from liveplex.operator import signals

GROUP = "liveplex"
LATENESS_BUDGET_S = 0.020
"""The default `latenessBudgetMillis`: a LiveEngine with another budget gets this alert at 20 ms."""


@dataclass(frozen=True, slots=True)
class Alert:
    name: str
    signal: str
    """PromQL with a series per affected engine, pool, pod or gateway while the platform runs."""
    condition: str
    """What turns the signal into the alert, appended to it (`> 0.02`)."""
    hold: str
    """Prometheus `for:`."""
    severity: str
    summary: str
    action: str
    """What the person paged should do."""

    @property
    def expr(self) -> str:
        return f"{self.signal} {self.condition}"


def _lateness_p99(by: str) -> str:
    return (f"histogram_quantile(0.99, sum by ({by}, le) "
            f"(rate(liveplex_engine_tick_lateness_seconds_bucket[{signals.LATENESS_WINDOW}])))")


def _or_zero(expr: str, by: str, base: str) -> str:
    """`expr`, or 0 for each `by` group of `base` (a series that always exists): a count of events
    that have not happened yet has no series at all, and an alert on it could not be told from a
    broken one."""
    return f"({expr} or sum by ({by}) ({base}) * 0)"

_UNCLAIMED = ('sum by (liveengine) '
              '(increase(liveplex_engine_parked_ended_total{reason="window_passed"}[1h]))')
"""Calls parked for a re-attach whose window passed with no caller back, per pool, over an hour."""

ALERTS: tuple[Alert, ...] = (
    Alert("LiveplexTickLatenessOverBudget", _lateness_p99("liveengine"), f"> {LATENESS_BUDGET_S}",
          "10m", "warning", "{{ $labels.liveengine }}: p99 tick lateness over 20 ms",
          "Callers hear glitches. The pool runs more sessions than its GPUs keep in time: lower "
          "capacity.maxSessions, add pods, or look for one slow node (LiveplexPodDegraded)."),
    Alert("LiveplexPodDegraded", _lateness_p99("liveengine, pod"), f"> {LATENESS_BUDGET_S}",
          "5m", "warning", "{{ $labels.pod }} runs its ticks late",
          "Placement ranks the pod last already. Check its node (GPU clocks, thermal throttling, a "
          "noisy neighbour); delete the pod if it stays late, its sessions drain first."),
    Alert("LiveplexSessionsRefused",
          _or_zero('sum by (liveengine) (rate(liveplex_gateway_placements_total{result="busy"}[5m]))', "liveengine",
                   "liveplex_gateway_sessions_active")
          + " / sum by (liveengine) (rate(liveplex_gateway_placements_total[5m]))", "> 0.05", "10m", "warning",
          "{{ $labels.liveengine }}: over 5 % of session starts refused for want of room",
          "The pool is full. Check the autoscaler (kubectl describe le) and its maxReplicas, and "
          "whether new pods are stuck Pending for GPUs."),
    Alert("LiveplexNoEngines",
          _or_zero('sum by (liveengine) (increase(liveplex_gateway_sessions_rejected_total{reason="no_engines"}[5m]))',
                   "liveengine", "liveplex_gateway_sessions_active"),
          "> 0", "2m", "critical", "{{ $labels.liveengine }}: starts refused, no engine ready",
          "Every caller of this model is refused. kubectl get le,pods: are the pods crash-looping, "
          "Pending, or still loading weights?"),
    Alert("LiveplexRedisUnreachable", "sum by (namespace, pod) (rate(liveplex_gateway_redis_errors_total[2m]))", "> 0",
          "2m", "critical", "{{ $labels.pod }} cannot reach the placement Redis",
          "Gateways place from their last snapshot for 5 s, then refuse. Check the Redis pod or "
          "service and the NetworkPolicy; the pods' heartbeats fail too."),
    Alert("LiveplexUpstreamConnectFailures",
          _or_zero("sum by (namespace, pod) (rate(liveplex_gateway_upstream_connect_failures_total[5m]))",
                   "namespace, pod", "liveplex_gateway_sockets_open"), "> 0", "5m", "warning",
          "{{ $labels.pod }} cannot connect to engine pods",
          "Placement reserves a pod the gateway cannot reach: a NetworkPolicy, a pod that lost its "
          "network, or a pod token mismatch (gateway and engines read different Secrets)."),
    Alert("LiveplexSessionsLost",
          "sum by (namespace, pod, reason) (increase(liveplex_gateway_sessions_lost_total[5m]))",
          "> 0", "0m", "critical", "{{ $labels.pod }}: live calls cut ({{ $labels.reason }})",
          "Engines died or hung mid-call (reason silent: a stopped or wedged engine; lost: a crash "
          "or a lost node). Find the pod in the gateway's logs (`upstream silent`) and its events."),
    Alert("LiveplexGatewayLoopStalls", "sum by (namespace, pod) (increase(liveplex_gateway_loop_stalls_total[10m]))",
          "> 3", "0m", "warning", "{{ $labels.pod }}: event loop blocked over 100 ms, repeatedly",
          "Every relayed call froze each time. The gateway's `event loop stalled` log lines say how "
          "long and whether the collector ran; check its CPU limit and throttling."),
    Alert("LiveplexParkedCallsUnclaimed",
          f"{_UNCLAIMED} / ({_UNCLAIMED} + "
          'sum by (liveengine) (increase(liveplex_engine_reattaches_total{result="parked"}[1h])))',
          f"> 0.5 and on (liveengine) {_UNCLAIMED} >= 5", "0m", "warning",
          "{{ $labels.liveengine }}: most calls parked for a re-attach end with no caller back",
          "Calls whose gateway went away (a rollout, a crash) were kept on their pods for "
          "continuity.reattachGraceSeconds, and their callers did not re-attach: their clients do not "
          "reconnect with ?session_id= (docs/continuity.md, Re-attach), or cannot reach another gateway. "
          "Each held its slot for the window for nothing: fix the clients, or lower the window (0: off)."),
    Alert("LiveplexWakesRefused",
          "sum by (liveengine, pod) (increase(liveplex_engine_wakes_refused_total[10m]))", "> 0", "0m", "warning",
          "{{ $labels.pod }}: paused callers spoke and found no engine slot",
          "A paused session's caller is not heard until a later speech frame finds a slot (docs/pause.md): "
          "the pod held more paused sessions than spec.pause.wakeReserve keeps slots for, and more woke at "
          "once. Raise pause.wakeReserve (a reserve at least the paused sessions never refuses), or lower "
          "pause.maxPaused; liveplex_engine_sessions_out shows how many the pod holds."),
    Alert("LiveplexOperatorReconcileFailing",
          'sum by (namespace, pod) (rate(liveplex_operator_reconciles_total{outcome=~"retry|error"}[10m]))',
          "> 0", "15m", "warning", "{{ $labels.pod }}: the operator keeps failing to reconcile",
          "LiveEngine changes are not applied. kubectl get le shows which (READY False, REASON); the "
          "operator's JSON logs carry the API server's answer (a refused child, RBAC, Redis)."),
    Alert("LiveplexOperatorNoLeader", "sum(liveplex_operator_leader)", "< 1", "2m", "critical",
          "no operator replica holds the leader Lease",
          "Nothing reconciles LiveEngines or autoscales them. Check the operator pods (kubectl -n "
          "<release namespace> get pods) and the Lease (kubectl get lease); a replica that cannot "
          "renew it exits and restarts. Operators all down show as their scrape targets down."),
)


def rule_file() -> dict[str, object]:
    """The alerts as a Prometheus rule file (`rule_files:`, `promtool check rules`, and the
    `PrometheusRule`'s `spec`)."""
    return {"groups": [{"name": GROUP, "rules": [
        {"alert": a.name, "expr": a.expr, "for": a.hold, "labels": {"severity": a.severity},
         "annotations": {"summary": a.summary, "action": a.action}} for a in ALERTS]}]}
