"""The core: services, tools, sessions, limits and the dispatcher, behind one port.

:class:`Core` owns what every face shares and the order it starts and stops
in: the services (audit trail, conversation store, ledger, providers, memory,
the job store), the tool registry, the capacity limiters, the sessions and
their replay cache, the dispatcher, the state shared with other daemons on a
Postgres store, the bridge to external MCP servers, and the heartbeat that
keeps long calls visibly alive. It implements :class:`exai.port.Port`, which
is all a face receives; which faces exist is the composition root's business
(:mod:`exai.app`), not the core's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Coroutine
from typing import Any

from exai import __version__
from exai.admission import Admission
from exai.audit.readiness import audit_check
from exai.auth import Authenticator, Credential, Principal, parse_token_list
from exai.bridge import Bridge
from exai.cluster import ClusterState, SharedReasoning, open_cluster, open_shared_reasoning
from exai.daemon.call import StopReason
from exai.daemon.dispatch import Dispatcher
from exai.daemon.keys import KeyWatcher, StoreKeyAdmin
from exai.daemon.limits_admin import StoreLimitsAdmin
from exai.daemon.local import LocalCaller
from exai.daemon.reads import CoreReads
from exai.daemon.replay import ReplayCache
from exai.daemon.services import build_services, close_services, open_jobs
from exai.daemon.session import Session, SessionRegistry
from exai.keys import KeyRing
from exai.limits import CapacityLimiter
from exai.logs import get_logger
from exai.metrics import DaemonMetrics
from exai.protocol import CallToolFrame, ToolInfo
from exai.settings import Settings
from exai.store.sql import SqlStore
from exai.tools.base import Services
from exai.tools.registry import ToolRegistry
from exai.tracing import setup as tracing_setup
from exai.tracing import state as tracing_state

__all__ = ["Core", "authenticator"]

log = get_logger("exai.daemon")


class Core:
    def __init__(
        self,
        settings: Settings,
        *,
        registry: ToolRegistry | None = None,
        services: Services | None = None,
    ) -> None:
        self.settings = s = settings
        self.registry = registry or ToolRegistry.from_entry_points(settings)
        self._given_services = services
        self._services: Services | None = None
        # The operator's keys, filled from the store by a watcher once the core starts
        # (exai.daemon.keys); every face's authentication and the dispatcher read them.
        self.key_ring = KeyRing()
        self.auth = authenticator(settings, keys=self.key_ring)
        self.metrics = DaemonMetrics()
        self.global_limiter = CapacityLimiter("the daemon", s.max_inflight, s.queue_max,
                                              s.queue_timeout_s)  # fmt: skip
        self.admission = Admission(s.max_unauthenticated_per_ip, s.auth_failures_per_min,
                                   s.auth_failures_burst)  # fmt: skip
        self.started_at = time.time()
        # EXAI_PUBLIC_URL, else set by the composition root once the HTTP listener has
        # an address (exai.app.App.start).
        self.public_url: str | None = s.public_url
        self.bridge: Bridge | None = None
        self.cluster: ClusterState | None = None
        self.shared_reasoning: SharedReasoning | None = None
        self.sign_ins: SqlStore | None = None
        self.keys: KeyWatcher | None = None
        self.key_admin: StoreKeyAdmin | None = None
        self.limits_admin: StoreLimitsAdmin | None = None
        self._own_jobs = False
        self._ticker: asyncio.Task[None] | None = None
        self._background: set[asyncio.Future[Any]] = set()
        self._sessions: SessionRegistry | None = None
        self._dispatcher: Dispatcher | None = None
        self.reads = CoreReads(self)
        # Faces may add their own figures to the snapshot (the WebSocket face adds its
        # connection count); the core calls them without knowing whose they are.
        self.face_stats: list[Callable[[], dict[str, Any]]] = []
        # Run on each heartbeat after the sessions are swept, so what a face keeps (the
        # WebSocket face's heap keeper) sees what the sweep just let go of.
        self.after_sweep: list[Callable[[], None]] = []

    # --- lifecycle ------------------------------------------------------------

    @property
    def services(self) -> Services:
        assert self._services is not None, "the core has not started"
        return self._services

    @property
    def sessions(self) -> SessionRegistry:
        assert self._sessions is not None, "the core has not started"
        return self._sessions

    @property
    def dispatcher(self) -> Dispatcher:
        assert self._dispatcher is not None, "the core has not started"
        return self._dispatcher

    async def start(self) -> None:
        """Build the services, then what uses them, each given what it needs as it is
        made; after this, calls can be made."""
        s = self.settings
        services = await self._open_services()
        if s.mcp_servers_file is not None:
            self.bridge = Bridge(s, self.registry)
            await self.bridge.start()
        # With a Postgres store, sessions, finished results and rate counts are
        # shared with the other daemons on it; with SQLite this is None.
        self.cluster = open_cluster(services.store, s)
        self._sessions = SessionRegistry(
            lambda sid: CapacityLimiter(f"session {sid}", s.max_inflight_per_session,
                                        s.max_inflight_per_session * 4, s.queue_timeout_s),
            idle_ttl_s=max(s.replay_window_s, 60.0),
            results=ReplayCache(s.replay_window_s, s.replay_max_entries, s.replay_max_bytes),
            shared=self.cluster,
        )  # fmt: skip
        # The reasoning of callers' tool rounds, in the store too: any daemon on
        # Postgres finds a round another made, and SQLite keeps it over a restart.
        self.shared_reasoning = open_shared_reasoning(services.store, services.providers)
        # The console's sign-ins are kept in the store too (exai.store.sign_ins), and
        # so are the operator's keys, which every face's authentication reads from
        # memory that a watcher keeps current (exai.daemon.keys).
        if isinstance(services.store, SqlStore):
            self.sign_ins = services.store
            self.keys = KeyWatcher(services.store, self.key_ring)
            settle = services.ledger.flush if services.ledger is not None else None
            self.key_admin = StoreKeyAdmin(services.store, emit=services.audit.emit,
                                           changed=self.keys.refresh, settle=settle)  # fmt: skip
            await self.keys.load()
            self.keys.start()
            book = getattr(services.ledger, "limits", None)
            if book is not None and services.providers is not None:
                self.limits_admin = StoreLimitsAdmin(services.store, book,
                                                     services.providers.catalogue, self.settings,
                                                     services.audit.emit)  # fmt: skip
        self._dispatcher = Dispatcher(
            services, self.registry, self.metrics, self.global_limiter,
            shared_rates=self.cluster, keys=self.key_ring if self.keys is not None else None,
        )  # fmt: skip
        self._register_gauges()
        self._ticker = asyncio.create_task(self._tick(), name="exai-heartbeat")

    async def _open_services(self) -> Services:
        """The services, given the registry and the core's snapshot, with the job
        service open before any face listens: a tool that schedules jobs must find it
        from the first call on."""
        s, given = self.settings, self._given_services
        if given is None:
            self._services = await build_services(s, registry=self.registry, stats=self.stats)
            return self._services
        jobs = given.jobs
        if jobs is None and s.jobs_enabled:
            jobs = await open_jobs(s, self.registry, given.store)
            self._own_jobs = True
        self._services = dataclasses.replace(given, registry=self.registry, stats=self.stats,
                                             jobs=jobs)  # fmt: skip
        return self._services

    async def drain(self, grace_s: float) -> None:
        """Refuse new calls, let running ones finish within ``grace_s``, cancel the rest."""
        dispatcher = self._dispatcher
        if dispatcher is None:
            return
        dispatcher.draining = True
        tasks = [c.task for c in dispatcher.running if c.task is not None]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace_s)
        if pending:
            for session in self.sessions:
                for rid in list(session.calls):
                    dispatcher.cancel(session, rid, reason=StopReason.SHUTDOWN)
            await asyncio.wait(pending, timeout=5.0)

    async def close(self) -> None:
        """Stop the core's own tasks and close what it opened, in reverse order."""
        if self.bridge is not None:
            await self.bridge.aclose()
        if self._ticker is not None:
            self._ticker.cancel()
        if self.keys is not None:
            await self.keys.aclose()
        if self.cluster is not None:
            await self.cluster.aclose()
        if self.shared_reasoning is not None:
            await self.shared_reasoning.aclose()
        services = self._services
        if services is not None and self._own_jobs and services.jobs is not None:
            await services.jobs.store.aclose()
        if self._given_services is None and services is not None:
            await close_services(services)

    # --- the port -------------------------------------------------------------

    @property
    def draining(self) -> bool:
        return self._dispatcher is not None and self._dispatcher.draining

    def emit(self, kind: str, /, **fields: Any) -> None:
        self.services.audit.emit(kind, **fields)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def credential_problem(
        self, owner: str, credential: Credential | None, now: float
    ) -> str | None:
        return self.auth.credential_problem(owner, credential, now)

    def connect(
        self, principal: Principal, session_id: str | None = None, *, face: str = "local",
        client: str | None = None,
    ) -> LocalCaller:  # fmt: skip
        return LocalCaller(self.sessions, self.dispatcher, self.tools, self.spawn, principal,
                           session_id, face=face, client=client)  # fmt: skip

    async def open_session(
        self, principal: Principal, session_id: str | None
    ) -> tuple[Session, bool]:
        return await self.sessions.open_shared(principal, session_id)

    def submit(self, session: Any, frame: CallToolFrame, raw: str | None = None) -> Any:
        return self.dispatcher.submit(session, frame, raw)

    def cancel(self, session: Any, request_id: str) -> bool:
        return self.dispatcher.cancel(session, request_id)

    def tools(self, principal: Principal | None = None) -> list[ToolInfo]:
        infos = self.registry.infos()
        if principal is None or principal.scopes is None:
            return infos
        return [info for info in infos if principal.may_call(info.name)]

    def tool_schema(self, name: str) -> dict[str, Any] | None:
        tool = self.registry.get(name)
        return tool.input_schema() if tool is not None else None

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Each dependency reports ``ok``; the daemon is ready when all of them do."""
        checks: dict[str, Any] = {"server": {"ok": not self.draining}}
        services = self._services
        store = getattr(services, "store", None)
        if store is not None and hasattr(store, "ping"):
            try:
                await store.ping()
                checks["store"] = {"ok": True}
            except Exception as exc:
                checks["store"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        audit_stats = getattr(getattr(services, "audit", None), "stats", None)
        if callable(audit_stats):
            checks["audit"] = audit_check(audit_stats())
        providers = getattr(services, "providers", None)
        if providers is not None:
            checks["providers"] = {"ok": True, **providers.status()}
        return all(c.get("ok", False) for c in checks.values()), checks

    def in_flight(self) -> int:
        return len(self._dispatcher.running) if self._dispatcher is not None else 0

    def stats(self) -> dict[str, Any]:
        s = self.settings
        out: dict[str, Any] = {
            "version": __version__,
            "uptime_s": round(time.time() - self.started_at, 1),
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
        for face_stats in self.face_stats:
            out.update(face_stats())
        audit_stats = getattr(self.services.audit, "stats", None)
        if callable(audit_stats):
            out["audit"] = audit_stats()
        if self.services.sessions is not None:
            out["agent_sessions"] = self.services.sessions.stats()
        if self.cluster is not None:
            out["cluster"] = dict(self.cluster.stats)
        if self.shared_reasoning is not None:
            cache = self.shared_reasoning.cache
            out["tool_reasoning"] = {"bytes": cache.bytes_held, "rounds": len(cache),
                                     **dataclasses.asdict(cache.stats),
                                     **self.shared_reasoning.stats}  # fmt: skip
        trace_stats = tracing_setup.export_stats()
        if tracing_state.tracer is not None and trace_stats is not None:
            out["tracing"] = trace_stats.as_dict()
        if self.bridge is not None:
            out["mcp_servers"] = self.bridge.status()["servers"]
        return out

    # --- housekeeping -----------------------------------------------------------

    async def _tick(self) -> None:
        interval = self.settings.progress_interval_s
        period = min(1.0, interval / 2)
        while True:
            await asyncio.sleep(period)
            try:
                await self.dispatcher.heartbeat(self.sessions, interval)
                self.admission.sweep()
                self.sessions.sweep(time.monotonic())
                for hook in self.after_sweep:
                    hook()
            except Exception:
                log.exception("heartbeat failed")

    def _register_gauges(self) -> None:
        m = self.metrics
        m.gauge("exai_connections_unauthenticated", "Connections (WebSocket, HTTP) not logged in",
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
        shared_reasoning = self.shared_reasoning
        if shared_reasoning is not None:
            cache = shared_reasoning.cache
            m.gauge("exai_tool_reasoning_bytes", "Bytes of tool-round reasoning held in memory",
                    lambda: cache.bytes_held)  # fmt: skip
            m.gauge("exai_tool_reasoning_store_reads",
                    "Reads of the store for tool rounds memory did not hold, since start",
                    lambda: cache.stats.loads)  # fmt: skip
            m.gauge("exai_tool_reasoning_write_failures",
                    "Failed writes of tool-round reasoning to the store, since start",
                    lambda: shared_reasoning.stats["write_failures"])  # fmt: skip
        trace_stats = tracing_setup.export_stats()
        if trace_stats is not None:
            m.gauge("exai_trace_spans_exported", "Spans the trace exporter delivered",
                    lambda: trace_stats.spans_exported)  # fmt: skip
            m.gauge("exai_trace_spans_failed", "Spans lost because the collector failed",
                    lambda: trace_stats.spans_failed)  # fmt: skip
            m.gauge("exai_trace_export_failures", "Span batches the collector did not take",
                    lambda: trace_stats.batches_failed)  # fmt: skip
        keeper = self.services.sessions
        if keeper is not None:
            for key, doc in (
                ("kept", "Model-face requests kept as agent-session turns"),
                ("failed", "Agent-session turns the store refused"),
                ("dropped", "Agent-session turns let go at the queue's bound"),
                ("queued", "Agent-session turns waiting to be written"),
            ):
                m.gauge(f"exai_agent_session_turns_{key}", doc + ("" if key == "queued" else
                        ", since start"), lambda key=key: keeper.stats()[key])  # fmt: skip
        audit_stats = getattr(self.services.audit, "stats", None)
        if callable(audit_stats):
            m.gauge("exai_audit_backlog", "Audit events not yet shipped",
                    lambda: audit_stats().get("backlog", 0))  # fmt: skip
            m.gauge("exai_audit_dropped", "Audit events dropped at the outbox limit",
                    lambda: audit_stats().get("dropped", 0))  # fmt: skip


def authenticator(settings: Settings, *, keys: KeyRing | None = None) -> Authenticator:
    """The daemon's tokens and JWT secret as configured; ``keys``: the operator's keys,
    where a store keeps them (the CLI has none)."""
    tokens: dict[str, str] = {}
    if settings.ws_token is not None and settings.ws_token.get_secret_value():
        tokens[settings.ws_token.get_secret_value()] = "default"
    if settings.ws_tokens is not None:
        tokens.update(parse_token_list(settings.ws_tokens.get_secret_value()))
    secret = settings.jwt_secret.get_secret_value() if settings.jwt_secret else None
    return Authenticator(tokens, secret or None, settings.jwt_leeway_s, keys=keys)
