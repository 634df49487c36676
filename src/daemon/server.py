"""The daemon: a websockets server, its sessions, limits and services.

``Daemon`` wires the pieces together and owns their lifetimes: the services
(conversation store, providers, audit trail), the tool registry, the limits, the
heartbeat that keeps long calls visibly alive (and, on the same tick, hands
memory freed after a burst back to the system), and graceful shutdown (stop
accepting, let calls finish within the grace period, cancel the rest with
``CANCELLED``, close every connection with 1001).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve

from exai import __version__
from exai.auth import Authenticator, parse_token_list
from exai.bridge import Bridge
from exai.cluster import ClusterState, open_cluster
from exai.daemon.admission import Admission
from exai.daemon.connection import ConnectionHandler
from exai.daemon.dispatch import Dispatcher
from exai.daemon.heap import HeapKeeper
from exai.daemon.http import HttpEndpoints
from exai.daemon.metrics import DaemonMetrics
from exai.daemon.replay import ReplayCache
from exai.daemon.services import build_services, close_services
from exai.daemon.session import SessionRegistry
from exai.daemon.transport import ExaiConnection, WebsocketsLog
from exai.limits import CapacityLimiter
from exai.logs import get_logger
from exai.protocol import CloseCode
from exai.settings import Settings
from exai.tools.base import Services
from exai.tools.registry import ToolRegistry

__all__ = ["Daemon"]

log = get_logger("exai.daemon")

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


class Daemon:
    def __init__(
        self,
        settings: Settings,
        *,
        registry: ToolRegistry | None = None,
        services: Services | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry or ToolRegistry.from_entry_points(settings)
        self._own_services = services is None
        self.services = services
        self.auth = _authenticator(settings)
        self.metrics = DaemonMetrics()
        s = settings
        self.global_limiter = CapacityLimiter("the daemon", s.max_inflight, s.queue_max,
                                              s.queue_timeout_s)  # fmt: skip
        self.sessions = SessionRegistry(
            lambda sid: CapacityLimiter(f"session {sid}", s.max_inflight_per_session,
                                        s.max_inflight_per_session * 4, s.queue_timeout_s),
            idle_ttl_s=max(s.replay_window_s, 60.0),
            results=ReplayCache(s.replay_window_s, s.replay_max_entries, s.replay_max_bytes),
        )  # fmt: skip
        self.connections: set[ServerConnection] = set()
        self.per_ip: Counter[str] = Counter()
        self.admission = Admission(s.max_unauthenticated_per_ip, s.auth_failures_per_min,
                                   s.auth_failures_burst)  # fmt: skip
        self.heap = HeapKeeper()
        self.started_at = time.time()
        self._server: Server | None = None
        self.bridge: Bridge | None = None
        self.web: Any = None  # exai.web.WebFace, when EXAI_HTTP_PORT is set
        self.jobs: Any = None  # exai.jobs.runner.JobRunner, when EXAI_JOBS_ENABLED
        self._ticker: asyncio.Task[None] | None = None
        self._stopping = False
        self.cluster: ClusterState | None = None
        self._background: set[asyncio.Future[Any]] = set()
        self.stopped = asyncio.Event()

    # --- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        s = self.settings
        if self.auth.open:
            if s.ws_host not in _LOOPBACK:
                raise RuntimeError(
                    f"refusing to listen on {s.ws_host} without a token: set EXAI_WS_TOKEN, "
                    "EXAI_WS_TOKENS or EXAI_JWT_SECRET, or bind EXAI_WS_HOST=127.0.0.1"
                )
            log.warning("no token configured: any local process may call tools",
                        host=s.ws_host)  # fmt: skip
        if self.services is None:
            self.services = await build_services(s)
        self.services.registry = self.registry
        self.services.stats = self.stats
        if s.mcp_servers_file is not None:
            self.bridge = Bridge(s, self.registry)
            await self.bridge.start()
        self.audit = self.services.audit
        self.dispatcher = Dispatcher(self.services, self.registry, self.metrics,
                                     self.global_limiter)  # fmt: skip
        # With a Postgres store, sessions, finished results and rate counts are
        # shared with the other daemons on it; with SQLite this is None.
        self.cluster = open_cluster(self.services.store, s)
        self.sessions.shared = self.dispatcher.shared_rates = self.cluster
        self.http = HttpEndpoints(self)
        self._register_gauges()
        self._server = await serve(
            ConnectionHandler(self),
            s.ws_host,
            s.ws_port,
            process_request=self.http.process_request,
            create_connection=ExaiConnection,
            compression="deflate" if s.ws_compression else None,
            # Until its hello succeeds a client may send only a frame the size of a
            # hello; the handshake then raises the limit for it to twice
            # max_frame_bytes (frames in between get an error frame from us). Beyond
            # the limit websockets closes with 1009 before reading the frame into memory.
            max_size=min(s.hello_max_bytes, s.max_frame_bytes * 2),
            max_queue=64,
            ping_interval=20,
            ping_timeout=20,
            server_header=f"exai/{__version__}",
            logger=WebsocketsLog(),
            # A browser sends Origin, and any page may open a WebSocket to loopback: only
            # the origins allowed may; programs, which send none, always may.
            origins=[None, *s.allowed_origins],
        )
        if s.http_port is not None:
            from exai.web import WebFace  # the HTTP faces sit above the daemon they call

            self.web = WebFace(self)
            await self.web.start()
        self._ticker = asyncio.create_task(self._tick(), name="exai-heartbeat")
        from exai.jobs.runner import attach  # scheduled jobs sit above the dispatcher they call

        self.jobs = await attach(self)
        log.info(
            "daemon listening", host=s.ws_host, port=self.port, tools=len(self.registry.names())
        )

    @property
    def port(self) -> int:
        assert self._server is not None
        sock = next(iter(self._server.sockets))
        return int(sock.getsockname()[1])

    @property
    def url(self) -> str:
        return f"ws://{self.settings.ws_host}:{self.port}"

    async def stop(self, grace_s: float | None = None) -> None:
        if self._stopping:
            await self.stopped.wait()
            return
        self._stopping = True
        grace = self.settings.shutdown_grace_s if grace_s is None else grace_s
        log.info("daemon stopping", in_flight=len(self.dispatcher.running), grace_s=grace)
        self.dispatcher.draining = True
        from exai.jobs.runner import detach

        await detach(self, self.jobs)
        assert self._server is not None
        self._server.close(close_connections=False)
        tasks = [c.task for c in self.dispatcher.running if c.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            if pending:
                for session in self.sessions:
                    for rid in list(session.calls):
                        self.dispatcher.cancel(session, rid, reason="shutdown")
                await asyncio.wait(pending, timeout=5.0)
        await asyncio.gather(
            *(
                ws.close(CloseCode.GOING_AWAY, "server shutting down")
                for ws in list(self.connections)
            ),
            return_exceptions=True,
        )
        await self._server.wait_closed()
        if self.web is not None:
            await self.web.stop()
        if self.bridge is not None:
            await self.bridge.aclose()
        if self._ticker is not None:
            self._ticker.cancel()
        if self.cluster is not None:
            await self.cluster.aclose()
        if self._own_services and self.services is not None:
            await close_services(self.services)
        log.info("daemon stopped")
        self.stopped.set()

    async def __aenter__(self) -> Daemon:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- bookkeeping ------------------------------------------------------------

    def connection_opened(self, ws: ServerConnection, peer: str) -> None:
        self.connections.add(ws)
        self.per_ip[peer] += 1
        self.metrics.connections_total.inc()

    def connection_closed(self, ws: ServerConnection, peer: str) -> None:
        self.connections.discard(ws)
        self.per_ip[peer] -= 1
        if self.per_ip[peer] <= 0:
            del self.per_ip[peer]

    def at_connection_limit(self, peer: str) -> str | None:
        s = self.settings
        if self._stopping:
            return "the daemon is shutting down"
        if len(self.connections) >= s.max_connections:
            return f"too many connections ({s.max_connections})"
        if self.per_ip[peer] >= s.max_connections_per_ip:
            return f"too many connections from {peer} ({s.max_connections_per_ip})"
        return None

    async def _tick(self) -> None:
        interval = self.settings.progress_interval_s
        period = min(1.0, interval / 2)
        while True:
            await asyncio.sleep(period)
            try:
                await self.dispatcher.heartbeat(self.sessions, interval)
                self.admission.sweep()
                # Sessions first: what they let go of is freed before the heap is looked at.
                self.sessions.sweep(time.monotonic())
                self.heap.tick(ExaiConnection.ended)
            except Exception:
                log.exception("heartbeat failed")

    def spawn(self, coro: Any) -> None:
        """Run a fire-and-forget coroutine, holding a reference so it is not collected."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def in_flight(self) -> int:
        return len(self.dispatcher.running)

    def stats(self) -> dict[str, Any]:
        s = self.settings
        out: dict[str, Any] = {
            "version": __version__,
            "uptime_s": round(time.time() - self.started_at, 1),
            "connections": len(self.connections),
            "sessions": len(self.sessions),
            "in_flight": self.in_flight(),
            "queued": self.global_limiter.waiting,
            "tasks": len(asyncio.all_tasks()),
            "limits": {
                "max_inflight": s.max_inflight,
                "max_inflight_per_session": s.max_inflight_per_session,
                "max_connections": s.max_connections,
                "max_frame_bytes": s.max_frame_bytes,
                "rate_limit_per_min": s.rate_limit_per_min,
            },
        }
        audit_stats = getattr(self.audit, "stats", None)
        if callable(audit_stats):
            out["audit"] = audit_stats()
        if self.cluster is not None:
            out["cluster"] = dict(self.cluster.stats)
        if self.bridge is not None:
            out["mcp_servers"] = self.bridge.status()["servers"]
        return out

    def _register_gauges(self) -> None:
        m = self.metrics
        m.gauge("exai_connections", "Open WebSocket connections", lambda: len(self.connections))
        m.gauge("exai_connections_unauthenticated", "WebSocket connections before a valid hello",
                lambda: self.admission.unauthenticated)  # fmt: skip
        m.gauge("exai_sessions", "Known sessions", lambda: len(self.sessions))
        m.gauge("exai_calls_in_flight", "Tool calls running", self.in_flight)
        replay = self.sessions.results
        m.gauge("exai_replay_entries", "Results kept for replay", lambda: len(replay))
        m.gauge("exai_replay_bytes", "Bytes held by the replay cache (EXAI_REPLAY_MAX_BYTES)",
                lambda: replay.bytes)  # fmt: skip
        m.gauge(
            "exai_calls_queued", "Calls waiting for capacity", lambda: self.global_limiter.waiting
        )
        cluster = self.cluster
        if cluster is not None:
            for key in ("resumed", "lookups", "results_written", "sync_failures"):
                m.gauge(f"exai_cluster_{key}", f"Shared-state {key.replace('_', ' ')} since start",
                        lambda key=key: cluster.stats[key])  # fmt: skip
        audit_stats = getattr(self.audit, "stats", None)
        if callable(audit_stats):
            m.gauge("exai_audit_backlog", "Audit events not yet shipped",
                    lambda: audit_stats().get("backlog", 0))  # fmt: skip
            m.gauge("exai_audit_dropped", "Audit events dropped at the outbox limit",
                    lambda: audit_stats().get("dropped", 0))  # fmt: skip


def _authenticator(settings: Settings) -> Authenticator:
    tokens: dict[str, str] = {}
    if settings.ws_token is not None and settings.ws_token.get_secret_value():
        tokens[settings.ws_token.get_secret_value()] = "default"
    if settings.ws_tokens is not None:
        tokens.update(parse_token_list(settings.ws_tokens.get_secret_value()))
    secret = settings.jwt_secret.get_secret_value() if settings.jwt_secret else None
    return Authenticator(tokens, secret or None, settings.jwt_leeway_s)
