"""The sim pod: a CPU echo engine under the real drive loop, for CI, demos and capacity tests."""

from liveplex.sim_pod.echo import WORDS, Echo
from liveplex.sim_pod.engine import SimEngine
from liveplex.sim_pod.profile import SimProfile, add_arguments, profile_from_args

__all__ = ["WORDS", "Echo", "SimEngine", "SimProfile", "add_arguments", "profile_from_args"]
