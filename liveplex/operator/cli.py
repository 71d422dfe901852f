"""`liveplex operator`: `crd` prints the CustomResourceDefinition, `run` runs the operator.

`liveplex operator crd | kubectl apply -f -` installs the CRD; `liveplex operator run -n NS` (or
`-A`) reconciles LiveEngines with the current kubeconfig or the pod's service account.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

import yaml

from liveplex.operator import crd, placement_store, settings
from liveplex.placement import PlacementClient, url


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="liveplex operator", description="The LiveEngine operator.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("crd", help="print the LiveEngine CRD as YAML (pipe it to `kubectl apply -f -`)")
    run = commands.add_parser("run", help="reconcile LiveEngines")
    scope = run.add_mutually_exclusive_group(required=True)
    scope.add_argument("-n", "--namespace", action="append", metavar="NS", help="watch NS (repeatable)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace")
    run.add_argument("--redis-url", default=os.environ.get(url.REDIS_URL_ENV),
                     help="placement Redis (default: $LIVEPLEX_REDIS_URL); pods get it too unless --redis-secret")
    run.add_argument("--redis-secret", metavar="NAME[:KEY]", default=None,
                     help="pods read LIVEPLEX_REDIS_URL from this Secret in their namespace (key default: url)")
    run.add_argument("--pod-token-secret", metavar="NAME[:KEY]", default=None,
                     help="pods accept only the token in this Secret in their namespace, the gateways' "
                          "--pod-key-file (key default: token; default: pods take any client)")
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
    run.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser


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
        namespaces=tuple(args.namespace or ()), redis_url=args.redis_url, redis_secret=secret, pod_token_secret=token,
        image_repository=repository, image_tag=tag,
        engine_image_repository=args.engine_image or d.engine_image_repository, pod_defaults=defaults,
        liveness_endpoint=args.liveness,
        prometheus_url=args.prometheus_url, status_interval_s=args.status_interval_s,
    )


def print_crd() -> None:
    print(yaml.safe_dump(crd.render_crd(), sort_keys=False, width=120), end="")


def _run(s: settings.OperatorSettings) -> int:
    from liveplex.operator import handlers, kube  # kopf and kubernetes load only for `run`

    async def operate() -> None:
        loads = routes = None
        client = PlacementClient(s.redis_url) if s.redis_url else None
        if client is not None:
            loads, routes = placement_store.PlacementLoads(client), placement_store.PlacementRoutes(client)
        ctx = handlers.Context(settings=s, client=kube.OfficialClient(kube.load_config()), loads=loads,
                               routes=routes)
        try:
            await handlers.operate(ctx)
        finally:
            if client is not None:
                await client.close()

    asyncio.run(operate())
    return 0


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "crd":
        print_crd()
        return 0
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        s = settings_from_args(args)
    except ValueError as exc:
        print(f"liveplex operator run: {exc}", file=sys.stderr)
        return 2
    return _run(s)
