"""The handover routes match the same whatever order they are added in (the export's id is never "resume")."""

from __future__ import annotations

from starlette.routing import compile_path

from liveplex.gptlive.server import hop
from liveplex.pod.app import EXPORT_ROUTE


def test_the_export_route_takes_any_session_id_but_never_the_resume_path() -> None:
    pattern = compile_path(EXPORT_ROUTE)[0]
    assert pattern.match(hop.RESUME_PATH) is None
    for session_id in ("abc", "resume2", "resumed", "x-resume"):
        got = pattern.match(hop.EXPORT_PATH.format(session_id=session_id))
        assert got is not None and got["session_id"] == session_id
