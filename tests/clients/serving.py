"""A Starlette app on an ephemeral loopback port, served from a background thread.

A TEST FIXTURE helper for the model-API stand-ins: a thread with its own event
loop keeps answering while a test blocks on a client subprocess.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn

__all__ = ["ThreadedApp"]


class ThreadedApp:
    def __init__(self, app: Any, name: str) -> None:
        self.app = app
        self.name = name
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ThreadedApp:
        # IPPROTO_TCP: asyncio sets TCP_NODELAY only when the proto says TCP (see exai.web.app).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off", access_log=False)
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])), name=self.name, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"{self.name} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10.0)

    def __enter__(self) -> ThreadedApp:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
