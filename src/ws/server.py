"""The WebSocket face: a websockets server speaking protocol v1 to the core's port.

:class:`WebSocketFace` owns what only a WebSocket has: the listening socket,
its connections (counted per address and in all, within the connection
limits), the handshake and frame loop (:mod:`exai.ws.connection`), the
frames-in-as-they-arrive transport (:mod:`exai.ws.transport`), the plain HTTP
endpoints on the same port (:mod:`exai.ws.http`), the heap keeper that hands
memory back after a storm of disconnects (:mod:`exai.ws.heap`), and closing
every connection with 1001 on shutdown. Everything a call needs it asks of
the :class:`~exai.port.Port`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve

from exai import __version__
from exai.logs import get_logger
from exai.port import Port
from exai.protocol import CloseCode
from exai.ws.connection import ConnectionHandler
from exai.ws.heap import HeapKeeper
from exai.ws.http import HttpEndpoints
from exai.ws.open_connections import OpenConnections
from exai.ws.transport import ExaiConnection
from exai.ws.websockets_log import WebsocketsLog

__all__ = ["WebSocketFace"]

log = get_logger("exai.daemon")

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


class WebSocketFace:
    def __init__(self, core: Port) -> None:
        self.core = core
        self.settings = core.settings
        self.open = OpenConnections(core)
        self.connections: set[ServerConnection] = self.open.connections
        self.heap = HeapKeeper()
        self._server: Server | None = None
        self.http = HttpEndpoints(core, self.open)

    async def start(self) -> None:
        s, core = self.settings, self.core
        if core.auth.open:
            if s.ws_host not in _LOOPBACK:
                raise RuntimeError(
                    f"refusing to listen on {s.ws_host} without a token: set EXAI_WS_TOKEN, "
                    "EXAI_WS_TOKENS or EXAI_JWT_SECRET, or bind EXAI_WS_HOST=127.0.0.1"
                )
            log.warning("no token configured: any local process may call tools",
                        host=s.ws_host)  # fmt: skip
        m = core.metrics
        m.gauge("exai_connections", "Open WebSocket connections", lambda: len(self.connections))
        self._server = await serve(
            ConnectionHandler(core, self.open),
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
        log.info("daemon listening", host=s.ws_host, port=self.bound_port,
                 tools=len(core.tools()))  # fmt: skip

    @property
    def bound_port(self) -> int:
        assert self._server is not None
        sock = next(iter(self._server.sockets))
        return int(sock.getsockname()[1])

    @property
    def url(self) -> str:
        return f"ws://{self.settings.ws_host}:{self.bound_port}"

    def stop_accepting(self) -> None:
        """Take no new connection; those open keep being served until :meth:`close`."""
        self.open.closing = True
        if self._server is not None:
            self._server.close(close_connections=False)

    async def close(self) -> None:
        """Close every connection with 1001 and the server with them."""
        self.stop_accepting()
        await asyncio.gather(
            *(
                ws.close(CloseCode.GOING_AWAY, "server shutting down")
                for ws in list(self.connections)
            ),
            return_exceptions=True,
        )
        if self._server is not None:
            await self._server.wait_closed()

    # --- bookkeeping ------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {"connections": len(self.connections)}

    def keep_heap(self) -> None:
        """Hand memory freed after a burst back to the system (the core calls this on
        each heartbeat, right after it swept the sessions)."""
        self.heap.tick(ExaiConnection.ended)
