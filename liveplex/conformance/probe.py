"""Reads what the server reports about itself over plain HTTP (`/live/config`, `/live/stats`, `/v1/models`)."""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request

from liveplex.conformance import target
from liveplex.gptlive import urls

logger = logging.getLogger(__name__)


class ProbeError(Exception):
    """The server did not answer a discovery request with JSON."""


def _get_json(url: str, bearer: str, timeout_s: float) -> object:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {bearer}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ProbeError(f"GET {url}: {exc}") from exc


async def get_json(url: str, bearer: str, timeout_s: float) -> object:
    """GET a JSON document without blocking the loop."""
    return await asyncio.to_thread(_get_json, url, bearer, timeout_s)


async def discover(options: target.Options) -> target.Server:
    """Ask the server what it serves; `/live/stats` may be missing (behind a gateway)."""
    base = options.base_url.rstrip("/")
    config = await get_json(urls.root_url(base, "/live/config"), options.bearer, options.timeout_s)
    models_doc = await get_json(f"{base}/models", options.bearer, options.timeout_s)
    try:
        stats = await get_json(urls.root_url(base, "/live/stats"), options.bearer, options.timeout_s)
    except ProbeError:
        logger.info("no /live/stats; capacity checks need --expect-capacity")
        stats = {}
    if not isinstance(config, dict) or not isinstance(stats, dict) or not isinstance(models_doc, dict):
        raise ProbeError("/live/config, /live/stats and /v1/models must be JSON objects")
    models = tuple(str(m.get("id")) for m in models_doc.get("data", []) if isinstance(m, dict))
    return target.Server(config=config, stats=stats, models=models)
