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
:mod:`exai.daemon.admission`).
"""

from __future__ import annotations

import json
import time
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from exai.errors import UnauthorizedError
from exai.redact import mask_url_credentials

if TYPE_CHECKING:
    from exai.daemon.server import Daemon

__all__ = ["HttpEndpoints"]

_PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


class HttpEndpoints:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    async def process_request(self, ws: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == "/health":
            body = {"status": "ok", "uptime_s": round(time.time() - self.daemon.started_at, 1)}
            return _json(ws, HTTPStatus.OK, body)
        if path == "/ready":
            ready, checks = await self.readiness()
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
            return _typed(ws, HTTPStatus.OK, self.daemon.metrics.render().decode(), _PROMETHEUS)
        if request.headers.get("Upgrade", "").lower() != "websocket":
            endpoints = ["/health", "/ready", "/metrics", "ws:// (protocol v1)"]
            return _json(ws, HTTPStatus.NOT_FOUND, {"error": "not found", "endpoints": endpoints})
        peer = str(ws.remote_address[0] if ws.remote_address else "?")
        daemon = self.daemon
        refusal = daemon.at_connection_limit(peer)
        if refusal is not None:
            daemon.metrics.connections_refused.labels("capacity").inc()
            return _json(ws, HTTPStatus.SERVICE_UNAVAILABLE, {"error": refusal})
        admission = daemon.admission
        refusal = admission.admit(ws, peer)
        if refusal is not None:
            daemon.metrics.connections_refused.labels("unauthenticated").inc()
            return _json(ws, HTTPStatus.TOO_MANY_REQUESTS, {"error": refusal})
        # Released when the hello succeeds, or whenever the connection ends: the
        # upgrade may still fail after this hook, and then no handler runs.
        ws.connection_lost_waiter.add_done_callback(lambda _: admission.release(ws))
        return None

    def _authorized(self, ws: ServerConnection, request: Request) -> bool:
        """A bearer token the daemon accepts, as ``hello`` would; any caller when it has none."""
        daemon = self.daemon
        if daemon.auth.open:
            return True
        peer = str(ws.remote_address[0] if ws.remote_address else "?")
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token or daemon.admission.login_wait_s(peer) > 0:
            return False
        try:
            daemon.auth.authenticate(token.strip())
        except UnauthorizedError:
            daemon.admission.login_failed(peer)
            return False
        return True

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Each dependency reports ``ok``; the daemon is ready when all of them do."""
        checks: dict[str, Any] = {"server": {"ok": not self.daemon.dispatcher.draining}}
        services = self.daemon.services
        store = getattr(services, "store", None)
        if store is not None and hasattr(store, "ping"):
            try:
                await store.ping()
                checks["store"] = {"ok": True}
            except Exception as exc:
                checks["store"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        audit_stats = getattr(getattr(services, "audit", None), "stats", None)
        if callable(audit_stats):
            st = audit_stats()
            checks["audit"] = {"ok": st.get("dropped", 0) == 0, **st}
        providers = getattr(services, "providers", None)
        if providers is not None:
            checks["providers"] = {"ok": True, **providers.status()}
        return all(c.get("ok", False) for c in checks.values()), checks


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
