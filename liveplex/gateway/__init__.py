"""The gateway: one GPT-Live endpoint for many pods, placing each session atomically over Redis and
relaying its frames verbatim (platform §7). It never imports engine code. See docs/gateway.md.
"""

from liveplex.gateway.backend import GatewayBackend
from liveplex.gateway.breaker import Breaker
from liveplex.gateway.catalog import PoolCatalog
from liveplex.gateway.gateway import Gateway
from liveplex.gateway.settings import GatewaySettings

__all__ = ["GatewayBackend", "Breaker", "PoolCatalog", "Gateway", "GatewaySettings"]
