"""Every typing `Protocol` in liveplex/ and what implements it, held to it by the type checker.

A class meets a Protocol by its shape, not by naming it, so nothing says so where the class is
written, and a class that drifts (a member missing, renamed, or with another signature) is only
noticed where it is passed as its Protocol, if it ever is. The table below assigns each
implementing class to `type[ItsProtocol]`: basedpyright reads this module (`[tool.basedpyright]`
in pyproject.toml; `scripts/test` runs it before pytest) and fails on any that does not fit. The
test makes sure no Protocol is left out of the table (docs/testing.md).
"""

from __future__ import annotations

import ast
import pathlib
import typing

from aiortc.jitterbuffer import JitterBuffer

from liveplex.engine_pod.engine import Parked as PersonaPlexParked
from liveplex.engine_pod.engine import PersonaPlexEngine
from liveplex.gateway import leg, watchdog
from liveplex.gateway.backend import GatewayBackend
from liveplex.gateway.calls import CallHolders
from liveplex.gateway.catalog import PoolCatalog
from liveplex.gateway.placer import RedisPlacer
from liveplex.gptlive import served, start
from liveplex.gptlive.server import backend, native, sweeper
from liveplex.gptlive.server.webrtc import forward, receive, sideband
from liveplex.gptlive.server.webrtc.call import Call as WebRtcCall
from liveplex.live import drive, fault, submissions
from liveplex.operator import apply, pool
from liveplex.operator.kube import OfficialClient
from liveplex.operator.placement_store import PlacementLoads, PlacementRoutes
from liveplex.personaplex import step
from liveplex.pod import backend as pod_backend
from liveplex.pod import heartbeat, parking, pause, vad
from liveplex.pod import pod as pod_shell
from liveplex.sim_pod.engine import SimEngine
from liveplex.storage.directory import DirectoryStore
from liveplex.storage.s3 import S3Store
from liveplex.storage.store import ObjectStore

ROOT = pathlib.Path(__file__).resolve().parents[1] / "liveplex"

# --- the table: each line fails the type check when its class does not fit its Protocol ------------

_engine_leg: type[backend.Leg] = pod_backend.EngineLeg
_upstream_leg: type[backend.Leg] = leg.UpstreamLeg
_live_socket_peer: type[backend.Peer] = native.LiveSocket
_live_socket: type[sweeper.Socket] = native.LiveSocket
_engine_backend: type[backend.Backend] = pod_backend.EngineBackend
_gateway_backend: type[backend.Backend] = GatewayBackend
_engine_observer: type[backend.Observer] = pod_backend.EngineBackend
_gateway_observer: type[backend.Observer] = GatewayBackend
_gateway_placer: type[leg.Placer] = RedisPlacer
_watched_leg: type[watchdog.Watched] = leg.UpstreamLeg
_pool_catalog: type[start.Catalog] = PoolCatalog
_served_catalog: type[start.Catalog] = served.Served
_kube: type[apply.KubeClient] = OfficialClient
_loads: type[pool.LoadReader] = PlacementLoads
_routes: type[pool.RouteStore] = PlacementRoutes
_heartbeat_settles: type[pod_backend.Settles] = heartbeat.Heartbeat
_heartbeat: type[pod_shell.Publisher] = heartbeat.Heartbeat
_sim_ticker: type[drive.Ticker] = SimEngine
_engine_ticker: type[drive.Ticker] = PersonaPlexEngine
_failing_ticker: type[drive.Ticker] = fault.FailingAfter
_webrtc_call: type[sideband.Attachable] = WebRtcCall
_webrtc_call_peer: type[backend.Peer] = WebRtcCall
_parked_peer: type[backend.Peer] = parking.Parked
_pausing_leg: type[pause.Leg] = pod_backend.EngineLeg
_silero_detector: type[vad.Detector] = vad.SileroStream
_call_holders: type[forward.Holders] = CallHolders
_prompt_receive: type[receive.ReceiveBuffer] = receive.Prompt
_aiortc_receive: type[receive.ReceiveBuffer] = JitterBuffer  # the bench caller's (bench/receive.py)
_directory_store: type[ObjectStore] = DirectoryStore
_s3_store: type[ObjectStore] = S3Store
_personaplex_parked: type[submissions.Parked] = PersonaPlexParked
_draw: typing.Callable[..., step.Draw] = step.sampled_draws  # a function that makes one


def _checked() -> set[str]:
    """The Protocols the table holds classes to, as `module.Name`."""
    hints = typing.get_type_hints(__import__(__name__, fromlist=["_"]))
    checked: set[str] = set()
    for name, hint in hints.items():
        if not name.startswith("_"):
            continue
        (protocol,) = typing.get_args(hint)[-1:] if typing.get_origin(hint) is not None else (hint,)
        checked.add(f"{protocol.__module__}.{protocol.__qualname__}")
    return checked


def _declared() -> set[str]:
    """Every class under liveplex/ that lists typing's `Protocol` among its bases."""
    found: set[str] = set()
    for path in ROOT.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    (isinstance(b, ast.Name) and b.id == "Protocol")
                    or (isinstance(b, ast.Attribute) and b.attr == "Protocol"  # not asyncio.Protocol
                        and isinstance(b.value, ast.Name) and b.value.id in ("typing", "typing_extensions"))
                    for b in node.bases):
                found.add(f"{module}.{node.name}")
    return found


def test_every_protocol_has_its_implementations_in_the_table() -> None:
    missing = _declared() - _checked()
    assert not missing, f"add each implementation of {sorted(missing)} to the table in this module"
