"""`/health` answers on both listeners: the admin one is what the chart's and the operator's
liveness probes call (a 500 there restarts every pod after 30 s)."""

from __future__ import annotations

import httpx

from tests.support import pods


async def test_health_answers_on_the_client_and_the_admin_listener() -> None:
    async with pods.in_process() as pod:
        assert pod.built is not None
        app = pod.built.app
        for listener in (app.public, app.admin):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=listener), base_url="http://pod") as http:
                response = await http.get("/health")
                assert (response.status_code, response.text) == (200, "ok")
