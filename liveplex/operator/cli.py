"""`liveplex operator`: `crd` prints the CustomResourceDefinition, `run` runs the operator.

`liveplex operator crd | kubectl apply -f -` installs the CRD; `liveplex operator run -n NS` (or
`-A`) reconciles LiveEngines with the current kubeconfig or the pod's service account. With
`--leader-lease NS/NAME` replicas elect one leader that reconciles; the others wait, serving
`/metrics` and `/healthz` all the same. A leader that loses its Lease exits with 1 (its container
restarts as a standby), so two never reconcile at once for longer than the Lease's renew deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import TYPE_CHECKING

from liveplex.logs import add_log_level, configure_logging
from liveplex.operator import crd, leader, placement_store, settings
from liveplex.placement import PlacementClient, url

if TYPE_CHECKING:
    from liveplex.operator import handlers


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="liveplex operator", description="The LiveEngine operator.")
    commands = parser.add_subparsers(dest="command", required=True)
    says = "print the LiveEngine CRD as YAML (pipe it to `kubectl apply -f -`)"
    commands.add_parser("crd", help=says, description=says)
    says = "reconcile LiveEngines with the current kubeconfig, or the pod's service account"
    run = commands.add_parser("run", help=says, description=says)
    scope = run.add_mutually_exclusive_group(required=True)
    scope.add_argument("-n", "--namespace", action="append", metavar="NS", help="watch NS (repeatable)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace")
    run.add_argument("--redis-url", default=None,
                     help=f"placement Redis (default: ${url.REDIS_URL_ENV}, with ${url.REDIS_CA_ENV} for rediss://); "
                          "pods get it too unless --redis-secret")
    run.add_argument("--redis-secret", metavar="NAME[:KEY]", default=None,
                     help="pods read LIVEPLEX_REDIS_URL from this Secret in their namespace (key default: url)")
    run.add_argument("--pod-token-secret", metavar="NAME[:KEY]", default=None,
                     help="pods accept only the token in this Secret in their namespace, the gateways' "
                          "--pod-key-file (key default: token; default: pods take any client)")
    run.add_argument("--pod-tls-secret", metavar="NAME", default=None,
                     help="engine pods serve TLS with this kubernetes.io/tls Secret in their namespace, for "
                          "gateways run with --upstream-ca (default: plain)")
    run.add_argument("--image", default=None, metavar="REPOSITORY[:TAG]",
                     help=f"engine image when spec.image is unset (default: {settings.DEFAULT_REPOSITORY}:"
                          f"{settings.OperatorSettings().image_tag})")
    run.add_argument("--engine-image", default=None, metavar="REPOSITORY",
                     help=f"personaplex pods' image repository when spec.image is unset, with --image's tag "
                          f"(default: {settings.DEFAULT_ENGINE_REPOSITORY})")
    run.add_argument("--runtime-class-name", default=None, metavar="NAME",
                     help="engine pods' runtimeClassName when spec.pod leaves it unset (default: none)")
    run.add_argument("--priority-class-name", default=None, metavar="NAME",
                     help="engine pods' priorityClassName when spec.pod leaves it unset (default: none)")
    run.add_argument("--image-pull-secret", action="append", default=[], metavar="NAME",
                     help="engine pods' imagePullSecrets when spec.pod leaves them unset (repeatable; default: none)")
    run.add_argument("--liveness", default=settings.DEFAULT_LIVENESS, metavar="URL", help="kopf's liveness endpoint")
    run.add_argument("--prometheus-url", default=settings.DEFAULT_PROMETHEUS, metavar="URL",
                     help="the Prometheus rendered KEDA ScaledObjects query")
    run.add_argument("--status-interval-s", type=float, default=10.0)
    run.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                     help="serve /metrics and /healthz here (0: a free port; default: not served)")
    run.add_argument("--metrics-host", default="0.0.0.0", metavar="ADDRESS",
                     help="address of /metrics and /healthz (default: %(default)s)")
    run.add_argument("--leader-lease", default=None, metavar="NS/NAME",
                     help="elect one leader among replicas with this coordination.k8s.io Lease "
                          "(default: none, this replica reconciles alone)")
    run.add_argument("--leader-lease-s", type=int, default=leader.DEFAULT_DURATION_S, metavar="S",
                     help="how long a leader that stopped renewing keeps the Lease (default: %(default)s)")
    add_log_level(run)
    return parser


def _lease(flag: str | None) -> tuple[str, str] | None:
    if not flag:
        return None
    namespace, sep, name = flag.partition("/")
    if not (sep and namespace and name and "/" not in name):
        raise ValueError(f"--leader-lease: expected NAMESPACE/NAME, got {flag!r}")
    return namespace, name


def _secret_key(flag: str | None, default_key: str) -> settings.SecretKey | None:
    """`NAME[:KEY]` as a Secret's key; None when the flag is not given."""
    if not flag:
        return None
    name, _, key = flag.partition(":")
    return settings.SecretKey(name, key or default_key)


def settings_from_args(args: argparse.Namespace) -> settings.OperatorSettings:
    """Build the settings once; raises ValueError naming the bad flag."""
    secret = _secret_key(args.redis_secret, "url")
    token = _secret_key(args.pod_token_secret, "token")
    d = settings.OperatorSettings()
    repository, tag = d.image_repository, d.image_tag
    if args.image:
        head, sep, tail = args.image.rpartition(":")
        repository, tag = (head, tail) if sep and "/" not in tail else (args.image, tag)
    defaults = settings.PodDefaults(runtime_class_name=args.runtime_class_name,
                                    priority_class_name=args.priority_class_name,
                                    image_pull_secrets=tuple(args.image_pull_secret))
    return settings.OperatorSettings(
        namespaces=tuple(args.namespace or ()), redis_url=url.redis_url(args.redis_url, os.environ),
        redis_secret=secret, pod_tls_secret=args.pod_tls_secret, pod_token_secret=token,
        image_repository=repository, image_tag=tag,
        engine_image_repository=args.engine_image or d.engine_image_repository, pod_defaults=defaults,
        liveness_endpoint=args.liveness,
        prometheus_url=args.prometheus_url, status_interval_s=args.status_interval_s,
        metrics_host=args.metrics_host, metrics_port=args.metrics_port, leader_lease=_lease(args.leader_lease),
        lease_duration_s=args.leader_lease_s,
    )


def print_crd() -> None:
    import yaml  # the operator extra's, as kopf is: after parsing, so that `--help` needs neither

    print(yaml.safe_dump(crd.render_crd(), sort_keys=False, width=120), end="")


def _run(s: settings.OperatorSettings) -> int:
    from liveplex.operator import handlers, kube, metrics  # kopf, kubernetes, aiohttp load only for `run`

    async def operate() -> int:
        seen = metrics.OperatorMetrics(stale_after_s=3 * s.status_interval_s)
        server = await metrics.serve(seen, s.metrics_host, s.metrics_port) if s.metrics_port is not None else None
        loads = routes = None
        client = PlacementClient(s.redis_url) if s.redis_url else None
        if client is not None:
            loads, routes = placement_store.PlacementLoads(client), placement_store.PlacementRoutes(client)
        api = kube.OfficialClient(kube.load_config())
        ctx = handlers.Context(settings=s, client=api, loads=loads, routes=routes, metrics=seen)
        try:
            if s.leader_lease is None:
                await handlers.operate(ctx)
                return 0
            return await _lead(ctx, leader.Elector(api, *s.leader_lease, leader.identity(), s.lease_duration_s))
        finally:
            if client is not None:
                await client.close()
            if server is not None:
                await server.cleanup()

    return asyncio.run(operate())


async def _lead(ctx: handlers.Context, elector: leader.Elector) -> int:
    """Wait for the Lease, then reconcile while renewing it: 0 after a clean stop (the Lease handed
    over), 1 when it was lost."""
    from liveplex.operator import handlers  # noqa: F811 (kopf loads only for `run`)

    await elector.acquire()
    ctx.metrics.leader = True
    stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    operating = asyncio.ensure_future(handlers.operate(ctx, stop_flag=stop))
    holding = asyncio.ensure_future(elector.hold())
    await asyncio.wait((operating, holding), return_when=asyncio.FIRST_COMPLETED)
    ctx.metrics.leader = False
    if holding.done():  # lost: stop reconciling before another replica starts
        stop.set_result(None)
        await operating
        return 1
    holding.cancel()
    await elector.release()
    operating.result()
    return 0


class KopfFields(logging.Filter):
    """kopf's object loggers attach its whole settings and the object's reference to every
    record; a log line keeps only the LiveEngine as `namespace/name`, as the metrics name it."""

    def filter(self, record: logging.LogRecord) -> bool:
        ref = vars(record).pop("k8s_ref", None)
        for noise in ("settings", "k8s_skip"):
            vars(record).pop(noise, None)
        if isinstance(ref, dict) and ref.get("name"):
            record.liveengine = f"{ref.get('namespace')}/{ref['name']}"
        return True


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "crd":
        print_crd()
        return 0
    configure_logging(args.log_level)
    for handler in logging.getLogger().handlers:
        handler.addFilter(KopfFields())
    try:
        s = settings_from_args(args)
    except ValueError as exc:
        print(f"liveplex operator run: {exc}", file=sys.stderr)
        return 2
    return _run(s)
