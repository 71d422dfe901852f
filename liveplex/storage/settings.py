"""Where stored sessions go, and for how long: `StoreSettings`, the flags that build it (the
gateway's, and `liveplex up`'s), and `open_store`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from liveplex import cli
from liveplex.flags import default_of
from liveplex.storage.directory import DirectoryStore
from liveplex.storage.store import ObjectStore


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """One of `directory` and `s3_bucket` (neither: nothing stored, `store: true` refused)."""

    directory: Path | None = None
    s3_bucket: str | None = None
    s3_endpoint: str | None = None
    """Any S3-compatible server (`http://minio:9000`); None: AWS itself."""
    s3_region: str | None = None
    s3_prefix: str | None = None
    retention_days: int = 30
    """Days a stored session is kept after the day it started; 0: until deleted by hand (or by
    the bucket's own lifecycle rule)."""
    flush_s: float = 2.0
    """How often a stored call's buffered recording is written: a gateway lost mid-call loses at
    most this much of it (plus one write's time)."""
    sweep_s: float = 3600.0
    """How often each gateway deletes the sessions past their retention."""

    @property
    def on(self) -> bool:
        return self.directory is not None or self.s3_bucket is not None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = StoreSettings
    g = parser.add_argument_group("stored sessions (store: true, docs/storage.md)")
    g.add_argument("--store-dir", type=Path, default=None, metavar="DIR",
                   help="keep stored sessions under this directory (a volume every replica mounts; default: none)")
    g.add_argument("--store-s3-bucket", default=None, metavar="BUCKET",
                   help="keep stored sessions in this S3 bucket (credentials from $AWS_ACCESS_KEY_ID and "
                        "$AWS_SECRET_ACCESS_KEY; needs the store-s3 extra; default: none)")
    g.add_argument("--store-s3-endpoint", default=None, metavar="URL",
                   help="an S3-compatible server's URL (MinIO, Ceph...; default: AWS)")
    g.add_argument("--store-s3-region", default=None, metavar="REGION",
                   help="the bucket's region (default: $AWS_REGION)")
    g.add_argument("--store-s3-prefix", default=None, metavar="PREFIX", help="keys under this prefix (default: none)")
    g.add_argument("--store-retention-days", type=int, default=default_of(d, "retention_days"),
                   help="days a stored session is kept, 0 = until deleted (default: %(default)s)")
    g.add_argument("--store-flush-s", type=float, default=default_of(d, "flush_s"),
                   help="how often a stored call's recording is written: what a lost gateway loses "
                        "(default: %(default)s)")


def settings_from_args(args: argparse.Namespace) -> StoreSettings:
    """Raises ValueError naming the flag."""
    if args.store_dir is not None and args.store_s3_bucket is not None:
        raise ValueError("--store-dir and --store-s3-bucket: give one of them")
    for flag, value in (("--store-s3-endpoint", args.store_s3_endpoint), ("--store-s3-region", args.store_s3_region),
                        ("--store-s3-prefix", args.store_s3_prefix)):
        if value is not None and args.store_s3_bucket is None:
            raise ValueError(f"{flag} needs --store-s3-bucket")
    if args.store_s3_endpoint is not None and not args.store_s3_endpoint.startswith(("http://", "https://")):
        raise ValueError(f"--store-s3-endpoint must be an http:// or https:// URL, got {args.store_s3_endpoint!r}")
    if args.store_retention_days < 0:
        raise ValueError(f"--store-retention-days must be >= 0, got {args.store_retention_days}")
    if not 0.1 <= args.store_flush_s <= 60:
        raise ValueError(f"--store-flush-s must be within 0.1..60, got {args.store_flush_s}")
    return StoreSettings(directory=args.store_dir, s3_bucket=args.store_s3_bucket, s3_endpoint=args.store_s3_endpoint,
                         s3_region=args.store_s3_region, s3_prefix=args.store_s3_prefix,
                         retention_days=args.store_retention_days, flush_s=args.store_flush_s)


def open_store(settings: StoreSettings) -> ObjectStore | None:
    """The store the settings name (None: none); raises `StoreError` when it cannot be made, and
    `cli.MissingExtra` for an S3 store without the `store-s3` extra."""
    if settings.directory is not None:
        return DirectoryStore(settings.directory)
    if settings.s3_bucket is not None:
        with cli.needs("store-s3"):
            from liveplex.storage.s3 import S3Store
        return S3Store(settings.s3_bucket, settings.s3_endpoint, settings.s3_region, settings.s3_prefix)
    return None
