"""The GPT-Live server layer a pod and the gateway share: the native uvicorn live socket (the
pump), the one timer, auth, settings, counters and the common app. What serves the sessions is a
`Backend`: a pod's engine or the gateway's upstream relay.
"""

from liveplex.gptlive.server.app import Front, create_app
from liveplex.gptlive.server.backend import Backend, Leg, Observer, Peer
from liveplex.gptlive.server.native import LiveProtocol
from liveplex.gptlive.server.passthrough import Passthrough
from liveplex.gptlive.server.settings import ServerSettings, add_arguments, settings_from_args
from liveplex.gptlive.server.stats import FrontSnapshot, FrontStats

__all__ = [
    "Front", "create_app", "Backend", "Leg", "Observer", "Peer", "LiveProtocol", "Passthrough",
    "ServerSettings", "add_arguments", "settings_from_args", "FrontSnapshot", "FrontStats",
]
