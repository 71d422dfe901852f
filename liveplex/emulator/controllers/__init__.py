"""The emulator's controllers: Deployments and ReplicaSets, the garbage collector, the local kubelet.

Development emulator, not for production.
"""

from liveplex.emulator.controllers.kubelet import Kubelet
from liveplex.emulator.controllers.loops import Controllers

__all__ = ["Controllers", "Kubelet"]
