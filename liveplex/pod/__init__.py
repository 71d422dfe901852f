"""A serving pod: the engine thread behind the shared GPT-Live server layer, its lifecycle
(start, drain, stop), its stats and metrics, and its Redis heartbeat. `liveplex serve` builds one.
"""

from liveplex.pod.app import create_app
from liveplex.pod.backend import EngineBackend
from liveplex.pod.pod import Pod
from liveplex.pod.settings import PodSettings
from liveplex.pod.stats import PodSnapshot

__all__ = ["create_app", "EngineBackend", "Pod", "PodSettings", "PodSnapshot"]
