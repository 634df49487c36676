"""A recording pass-through between a real agent and exai's model faces.

A TEST FIXTURE. It forwards every request to the daemon unchanged (body and
headers, but ``Host``) and streams the answer back as it comes, keeping each
exchange: the path, the request body, the status and the answer's bytes. The
agent tests write one tool round of each face from it to ``build/agents/``, so
the exact wire traffic of a real agent on each face can be read there.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.clients.serving import ThreadedApp

__all__ = ["AGENTS_DIR", "RecordingProxy", "write_round"]

AGENTS_DIR = Path(__file__).parents[2] / "build" / "agents"
_HOP = {"host", "content-length", "transfer-encoding", "connection"}


class RecordingProxy(ThreadedApp):
    def __init__(self, target: str) -> None:
        super().__init__(self._app(), "recording-proxy")
        self.target = target.rstrip("/")
        self.exchanges: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def _app(self) -> Starlette:
        async def forward(request: Request) -> Response:
            body = await request.body()
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
            # Kept as it arrives, not once answered: an agent that exits while exai is
            # still retrying one of its requests (opencode's title) has still sent it.
            exchange: dict[str, Any] = {
                "path": request.url.path,
                "status": None,
                "request": _json(body),
                "response": b"",
            }
            with self._lock:
                self.exchanges.append(exchange)
            client = httpx.AsyncClient(timeout=None)
            upstream = await client.send(
                client.build_request(
                    request.method,
                    self.target + request.url.path,
                    params=request.query_params,
                    headers=headers,
                    content=body,
                ),
                stream=True,
            )
            exchange["status"] = upstream.status_code

            async def relay() -> AsyncIterator[bytes]:
                try:
                    async for chunk in upstream.aiter_raw():
                        exchange["response"] += chunk
                        yield chunk
                finally:
                    await upstream.aclose()
                    await client.aclose()

            kept = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
            return StreamingResponse(relay(), status_code=upstream.status_code, headers=kept)

        return Starlette(
            routes=[Route("/{path:path}", forward, methods=["GET", "POST", "HEAD", "DELETE"])]
        )


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body.decode(errors="replace")


def write_round(name: str, exchanges: list[dict[str, Any]]) -> None:
    """Write a tool round (the request that got the call, the one that returned its result)
    to build/agents/<name>.md: each request body as JSON, each answer as it came."""
    AGENTS_DIR.mkdir(parents=True, exist_ok=True)
    parts = [f"# {name}: one tool round, as the test recorded it\n"]
    for n, exchange in enumerate(exchanges, 1):
        parts.append(
            f"## Request {n}: POST {exchange['path']}\n\n```json\n"
            f"{json.dumps(exchange['request'], indent=1, ensure_ascii=False)}\n```\n"
        )
        parts.append(
            f"## Answer {n}: HTTP {exchange['status']}\n\n```\n"
            f"{exchange['response'].decode(errors='replace')}\n```\n"
        )
    (AGENTS_DIR / f"{name}.md").write_text("\n".join(parts))
