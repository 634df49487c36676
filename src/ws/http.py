"""Plain HTTP on the WebSocket port: ``/health``, ``/ready`` and ``/metrics``.

``/health`` is open (it says only that the process answers). When the daemon
has tokens, ``/metrics`` needs one (``Authorization: Bearer``, checked as
``hello`` checks it) and ``/ready`` without one says only whether the daemon is
ready, not which dependency is failing or why.

websockets calls ``process_request`` before each opening handshake; answering
there serves these endpoints without a second listener. The same hook refuses a
WebSocket upgrade before any per-connection state exists: with 503 when the
connection limits are reached, with 429 when the address already has as many
connections that have not said ``hello`` as it may (see
:mod:`exai.admission`).
"""

from __future__ import annotations

import json
import time
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from exai.errors import UnauthorizedError
from exai.port import Port
from exai.redact import mask_url_credentials
from exai.ws.open_connections import OpenConnections

__all__ = ["HttpEndpoints"]

_PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


class HttpEndpoints:
    def __init__(self, core: Port, connections: OpenConnections) -> None:
        self.core = core
        self.connections = connections

    async def process_request(self, ws: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == "/health":
            body = {"status": "ok", "uptime_s": round(time.time() - self.core.started_at, 1)}
            return _json(ws, HTTPStatus.OK, body)
        if path == "/ready":
            ready, checks = await self.core.readiness()
            status = HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE
            # A probe without a token learns whether the daemon is ready, not why: the
            # checks name providers and quote other libraries' errors.
            answer: dict[str, Any] = {"ready": ready}
            if self._authorized(ws, request):
                answer["checks"] = checks
            text = mask_url_credentials(json.dumps(answer, default=str))
            return _typed(ws, status, text + "\n", "application/json")
        if path == "/metrics":
            if not self._authorized(ws, request):
                return _unauthorized(ws)
            return _typed(ws, HTTPStatus.OK, self.core.metrics.render().decode(), _PROMETHEUS)
        if request.headers.get("Upgrade", "").lower() != "websocket":
            endpoints = ["/health", "/ready", "/metrics", "ws:// (protocol v1)"]
            return _json(ws, HTTPStatus.NOT_FOUND, {"error": "not found", "endpoints": endpoints})
        peer = str(ws.remote_address[0] if ws.remote_address else "?")
        core = self.core
        refusal = self.connections.at_limit(peer)
        if refusal is not None:
            core.metrics.connections_refused.labels("capacity").inc()
            return _json(ws, HTTPStatus.SERVICE_UNAVAILABLE, {"error": refusal})
        admission = core.admission
        refusal = admission.admit(ws, peer)
        if refusal is not None:
            core.metrics.connections_refused.labels("unauthenticated").inc()
            return _json(ws, HTTPStatus.TOO_MANY_REQUESTS, {"error": refusal})
        # Released when the hello succeeds, or whenever the connection ends: the
        # upgrade may still fail after this hook, and then no handler runs.
        ws.connection_lost_waiter.add_done_callback(lambda _: admission.release(ws))
        return None

    def _authorized(self, ws: ServerConnection, request: Request) -> bool:
        """A bearer token the daemon accepts, as ``hello`` would; any caller when it has none."""
        core = self.core
        if core.auth.open:
            return True
        peer = str(ws.remote_address[0] if ws.remote_address else "?")
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token or core.admission.login_wait_s(peer) > 0:
            return False
        try:
            core.auth.authenticate(token.strip())
        except UnauthorizedError:
            core.admission.login_failed(peer)
            return False
        return True


def _unauthorized(ws: ServerConnection) -> Response:
    response = _json(ws, HTTPStatus.UNAUTHORIZED, {"error": "a bearer token is required"})
    response.headers["WWW-Authenticate"] = 'Bearer realm="exai"'
    return response


def _json(ws: ServerConnection, status: HTTPStatus, body: Any) -> Response:
    return _typed(ws, status, json.dumps(body, default=str) + "\n", "application/json")


def _typed(ws: ServerConnection, status: HTTPStatus, text: str, content_type: str) -> Response:
    response = ws.respond(status, text)
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = content_type
    return response
