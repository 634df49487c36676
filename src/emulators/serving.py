"""A Starlette app on a loopback port, served by a thread with its own event loop.

For the test fixtures (the provider and PostgREST emulators, the real-client
tests' API stand-ins): a server in a thread of its own keeps answering while
the test that uses it blocks, for example on a client subprocess.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn

__all__ = ["ServedApp", "serve_in_thread"]


class ServedApp:
    """A running server: its port, and how to stop it."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread, port: int) -> None:
        self.server = server
        self.thread = thread
        self.port = port

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=timeout_s)


def serve_in_thread(
    app: Any, name: str, *, host: str = "127.0.0.1", port: int = 0, **config: Any
) -> ServedApp:
    """Serve ``app`` on ``host:port`` (0: any free port) until :meth:`ServedApp.stop`.

    ``config`` goes to ``uvicorn.Config``. Returns once the server accepts connections.
    """
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only when the proto says TCP (see exai.web.app).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    options = {"log_level": "warning", "lifespan": "off", "access_log": False, **config}
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[sock])), name=name, daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 10.0
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"{name} did not start")
        time.sleep(0.005)
    return ServedApp(server, thread, sock.getsockname()[1])
