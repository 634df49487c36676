"""What the console's tests run against: a real daemon on a thread of its own, and a
stand-in for ntfy.

The browser tests drive Chromium with Playwright's synchronous API, which cannot
run inside an event loop; so the daemon (the real :class:`exai.app.App`, with the
provider emulator behind it) runs on a loop in a thread of its own, and the test
hands it coroutines (:meth:`LiveDaemon.run`), for example a WebSocket client's
calls that set up a thread or a job.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from exai.app import App
from exai.client import ExaiClient
from exai.emulators.serving import ServedApp, serve_in_thread
from exai.settings import Settings

__all__ = ["LiveDaemon", "NtfyStandIn", "wait_until"]

T = TypeVar("T")


class LiveDaemon:
    """A started :class:`App` on its own thread's event loop."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="live-daemon", daemon=True
        )
        self.app: App | None = None

    def start(self) -> LiveDaemon:
        self._thread.start()
        self.app = App(self.settings)
        self.run(self.app.start(), timeout_s=60)
        return self

    def stop(self) -> None:
        if self.app is not None:
            self.run(self.app.stop(grace_s=2.0), timeout_s=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    @property
    def base(self) -> str:
        assert self.app is not None and self.app.web is not None
        return f"http://127.0.0.1:{self.app.web.port}"

    def call(self, token: str, tool: str, arguments: dict[str, Any]) -> Any:
        """One tool call over the WebSocket face, as the principal of ``token``."""
        assert self.app is not None
        url = self.app.url

        async def go() -> Any:
            async with ExaiClient(url, token) as client:
                return await client.call(tool, arguments)

        return self.run(go(), timeout_s=60)


@dataclass
class Delivered:
    path: str
    headers: dict[str, str]
    body: str


@dataclass
class NtfyStandIn:
    """A stand-in for an ntfy server (a test fixture): it records every notification
    POSTed to it and answers 200, as ntfy does."""

    received: list[Delivered] = field(default_factory=list)
    served: ServedApp | None = None

    def start(self) -> NtfyStandIn:
        self.served = serve_in_thread(self, "ntfy-stand-in")
        return self

    def stop(self) -> None:
        if self.served is not None:
            self.served.stop()

    def url(self, topic: str) -> str:
        assert self.served is not None
        return f"http://127.0.0.1:{self.served.port}/{topic}"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.received.append(Delivered(scope["path"], headers, body.decode()))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def wait_until(check: Callable[[], T], timeout_s: float = 20.0, what: str = "it") -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last value {value!r}")
        time.sleep(0.05)
