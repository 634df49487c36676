"""A base for the model-API stand-ins: a Starlette app served from a thread.

A TEST FIXTURE helper; the serving itself is :func:`exai.emulators.serving.serve_in_thread`.
"""

from __future__ import annotations

from typing import Any

from exai.emulators.serving import ServedApp, serve_in_thread

__all__ = ["ThreadedApp"]


class ThreadedApp:
    def __init__(self, app: Any, name: str) -> None:
        self.app = app
        self.name = name
        self.port = 0
        self._served: ServedApp | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ThreadedApp:
        self._served = serve_in_thread(self.app, self.name)
        self.port = self._served.port
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()

    def __enter__(self) -> ThreadedApp:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
