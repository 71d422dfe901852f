"""A local Kubernetes stand-in for development (like KWOK): NOT for production, NOT a real cluster.

An in-memory API server complete enough for kubectl, kopf and the liveplex operator, controllers
for Deployments, ReplicaSets and garbage collection, and a kubelet that runs pods' containers as
local processes. docs/emulator.md says what it emulates and, plainly, what it does not prove.
"""

from liveplex.emulator.emulator import NODE, Emulator, run_emulator
from liveplex.emulator.kubeconfig import CLUSTER, write_kubeconfig

__all__ = ["CLUSTER", "NODE", "Emulator", "run_emulator", "write_kubeconfig"]
