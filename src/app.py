"""The composition root: the core, and the faces attached to it.

This is the one place that knows which faces exist. :class:`App` builds the
:class:`~exai.daemon.core.Core` (settings, services, tools, dispatcher) and
attaches the faces, each of which receives only the core's
:class:`~exai.port.Port`:

- the HTTP faces (:mod:`exai.web`: ``/mcp``, ``/v1``, the console) on
  ``EXAI_HTTP_PORT``, when it is set;
- the WebSocket face (:mod:`exai.ws`) on ``EXAI_WS_PORT``, always;
- the job runner (:mod:`exai.jobs.runner`), when ``EXAI_JOBS_ENABLED``.

(The stdio shim is a face too, but of another process: it reaches this one
over the WebSocket face, and its autostart launches ``exai serve``.)

Start-up runs in that order after the core, so no face takes a call before
the services it needs exist; a failure part-way stops what had started, so a
failed start leaves nothing running. Shutdown runs in reverse: the runner
stops claiming, the listeners stop accepting, running calls get the grace
period, then connections close with 1001 and the core closes its services.
``exai serve`` and the tests' daemon fixture both use this class.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable

from exai.bridge import BridgeConfigError
from exai.daemon.core import Core
from exai.jobs.runner import JobRunner
from exai.logs import get_logger
from exai.settings import Settings
from exai.tools.base import Services
from exai.tools.registry import ToolRegistry
from exai.web import WebFace
from exai.ws import WebSocketFace

__all__ = ["App", "StartupError"]

log = get_logger("exai.daemon")


class StartupError(Exception):
    """The daemon could not start; the message is one line naming the cause and the
    setting or port it comes from."""


def _listen_error(setting: str, host: str, port: int | None, exc: OSError) -> StartupError:
    reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
    hint = ""
    if exc.errno == errno.EADDRINUSE:
        hint = f"; another exai (or another program) is listening there, or set {setting}"
    return StartupError(f"cannot listen on {host}:{port} ({setting}): {reason}{hint}")


class App:
    def __init__(
        self,
        settings: Settings,
        *,
        registry: ToolRegistry | None = None,
        services: Services | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._clock = clock  # the job runner's wall clock
        self.core = Core(settings, registry=registry, services=services)
        self.ws = WebSocketFace(self.core)
        self.web: WebFace | None = None
        self.jobs: JobRunner | None = None
        self._started = False
        self._stopped = False

    async def start(self) -> None:
        """Start the core, then each face; on any failure, stop what started and re-raise
        (a port that cannot be listened on, or the bridge's file, as :class:`StartupError`)."""
        s = self.settings
        try:
            try:
                await self.core.start()
            except BridgeConfigError as exc:
                raise StartupError(f"EXAI_MCP_SERVERS_FILE: {exc}") from exc
            # The HTTP faces listen before the WebSocket face does: whoever waits for
            # the WebSocket port's /health (exai serve --detach, the shim's autostart,
            # a supervisor, HAProxy) then finds every face of the daemon up.
            if s.http_port is not None:
                self.web = WebFace(self.core)
                try:
                    await self.web.start()
                except OSError as exc:
                    raise _listen_error("EXAI_HTTP_PORT", s.ws_host, s.http_port, exc) from exc
                if self.core.public_url is None:
                    self.core.public_url = self.web.own_url
            try:
                await self.ws.start()
            except OSError as exc:
                raise _listen_error("EXAI_WS_PORT", s.ws_host, s.ws_port, exc) from exc
            self.core.face_stats.append(self.ws.stats)
            self.core.after_sweep.append(self.ws.keep_heap)
            jobs = self.core.services.jobs
            if jobs is not None:
                self.jobs = JobRunner(self.core, jobs.store, self.core.services.store,
                                      clock=self._clock)  # fmt: skip
                self.jobs.start()
        except BaseException:
            await self.stop(grace_s=0.0)
            raise
        self._started = True

    async def stop(self, grace_s: float | None = None) -> None:
        if self._stopped:
            return
        self._stopped = True
        grace = self.settings.shutdown_grace_s if grace_s is None else grace_s
        log.info("daemon stopping", in_flight=self.core.in_flight(), grace_s=grace)
        if self.jobs is not None:
            await self.jobs.aclose()
        self.ws.stop_accepting()
        await self.core.drain(grace)
        await self.ws.close()
        if self.web is not None:
            await self.web.stop()
        await self.core.close()
        log.info("daemon stopped")

    async def __aenter__(self) -> App:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- what tests, the baseline sandbox and scripts read --------------------

    @property
    def url(self) -> str:
        return self.ws.url

    @property
    def port(self) -> int:
        return self.ws.bound_port

    @property
    def services(self) -> Services:
        return self.core.services
