"""`liveplex check`: the GPT-Live conformance checker (gpt-live §12.4, §14); see docs/check.md."""

from liveplex.conformance.checklist import Check, Outcome, Status
from liveplex.conformance.frames import FrameValidator, Problem, Rule, Verdict
from liveplex.conformance.runner import run, select
from liveplex.conformance.schema import server_schemas
from liveplex.conformance.target import Options, Server, Target

__all__ = ["Check", "Outcome", "Status", "FrameValidator", "Problem", "Rule", "Verdict", "run", "select",
           "server_schemas", "Options", "Server", "Target"]
