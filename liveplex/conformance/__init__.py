"""`liveplex check`: the GPT-Live conformance checker (gpt-live §12.4, §14); see docs/check.md."""

from liveplex.conformance.frames import FrameValidator, Problem, Rule, Verdict
from liveplex.conformance.schema import server_schemas

__all__ = ["FrameValidator", "Problem", "Rule", "Verdict", "server_schemas"]
