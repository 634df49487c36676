"""One external MCP server, kept connected: start, list, watch, restart with backoff.

A supervisor task owns the connection (the SDK's transports and
``ClientSession`` are context managers that must be entered and left by one
task): it starts the server (a child process over stdio, or a streamable-HTTP
session), lists its tools, then watches it with pings. When the server fails to
start or dies, the supervisor records why, waits with exponential backoff and
jitter, and starts it again, listing its tools afresh.

A stdio server's environment is the minimal one every child of exai gets
(:func:`~exai.subprocesses.child_environment`), with a private, empty home
directory the servers share (``mcp-servers/home`` in the data directory), plus the
``env`` its entry in the servers file gives it: none of the daemon's keys or
tokens. The MCP SDK adds ``LOGNAME``, ``SHELL``, ``TERM`` and ``USER`` from the
daemon's environment to every server it starts.

Calls come from the daemon's call tasks and share the live session. While the
server is down they fail at once with ``PROVIDER_ERROR`` naming the server and
the reason, marked retryable with the time of the next attempt, so a failure is
visible to every caller and in ``status`` rather than silently dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Callable
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO

import httpx2
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from exai import __version__
from exai.bridge.config import ServerConfig
from exai.bridge.results import to_tool_result
from exai.errors import ProviderError, TimeoutError_
from exai.logs import get_logger
from exai.subprocesses import child_environment
from exai.tools.base import ToolContext, ToolResult

__all__ = ["LinkState", "ServerLink"]

log = get_logger("exai.bridge")

_START_TIMEOUT_S = 30.0
_BACKOFF_BASE_S = 0.5


class LinkState(StrEnum):
    STARTING = "starting"
    UP = "up"
    DOWN = "down"
    STOPPED = "stopped"


class ServerLink:
    def __init__(
        self,
        name: str,
        config: ServerConfig,
        *,
        call_timeout_s: float,
        retry_max_s: float,
        health_interval_s: float,
        log_dir: Path,
        on_tools: Callable[[ServerLink], None],
    ) -> None:
        self.name = name
        self.config = config
        self.call_timeout_s = config.timeout_s or call_timeout_s
        self.retry_max_s = retry_max_s
        self.health_interval_s = health_interval_s
        self.log_path = log_dir / f"{_file_safe(name)}.log"
        self.home = log_dir / "home"
        self._on_tools = on_tools
        self.state = LinkState.STARTING
        self.tools: list[types.Tool] = []
        self.last_error: str | None = None
        self.failures = 0
        self.starts = 0
        self.up_since: float | None = None
        self.retry_at: float | None = None
        self._session: ClientSession | None = None
        self._lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # --- lifecycle --------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp-server:{self.name}")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self._task = None
        self.state = LinkState.STOPPED

    async def _supervise(self) -> None:
        attempt = 0
        while True:
            self.state = LinkState.STARTING
            self.retry_at = None
            try:
                async with self._connect() as session:
                    tools = await self._list_tools(session)
                    self._session = session
                    self._lost.clear()
                    self.tools = tools
                    self.state = LinkState.UP
                    self.up_since = time.time()
                    self.last_error = None
                    self.starts += 1
                    attempt = 0
                    log.info("MCP server up", server=self.name, tools=len(tools))
                    self._on_tools(self)
                    await self._watch(session)
            except Exception as exc:
                self.last_error = _describe(exc)
            finally:
                self._session = None
            self.state = LinkState.DOWN
            self.up_since = None
            self.failures += 1
            delay = min(self.retry_max_s, _BACKOFF_BASE_S * 2**attempt) * (
                0.5 + random.random() / 2
            )
            attempt += 1
            self.retry_at = time.time() + delay
            log.warning("MCP server down", server=self.name, error=self.last_error,
                        retry_in_s=round(delay, 2))  # fmt: skip
            await asyncio.sleep(delay)

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[ClientSession]:
        c = self.config
        async with contextlib.AsyncExitStack() as stack:
            if c.command is not None:
                # The server's stderr goes to its own log, not into the daemon's.
                errlog = stack.enter_context(await asyncio.to_thread(_open_log, self.log_path))
                home = await asyncio.to_thread(_private_dir, self.home)
                env = child_environment(home=home, extra=c.env)
                params = StdioServerParameters(command=c.command, args=c.args, env=env, cwd=c.cwd)
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            else:
                assert c.url is not None
                http = await stack.enter_async_context(httpx2.AsyncClient(
                    headers=c.headers, timeout=httpx2.Timeout(30.0, read=300.0)))  # fmt: skip
                read, write = await stack.enter_async_context(
                    streamable_http_client(c.url, http_client=http)
                )
            info = types.Implementation(name="exai", version=__version__)
            session = await stack.enter_async_context(ClientSession(read, write, client_info=info))
            async with asyncio.timeout(_START_TIMEOUT_S):
                await session.initialize()
            yield session

    async def _list_tools(self, session: ClientSession) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        async with asyncio.timeout(_START_TIMEOUT_S):
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools

    async def _watch(self, session: ClientSession) -> None:
        """Return when the server is gone: a failed ping, or a call that saw it close."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.health_interval_s):
                    await self._lost.wait()
            if self._lost.is_set():
                raise ConnectionError(self.last_error or "the connection closed")
            async with asyncio.timeout(min(10.0, max(1.0, self.health_interval_s))):
                await session.send_ping()

    # --- calls ------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        session = self._session
        if session is None or self.state is not LinkState.UP:
            raise self._unavailable()
        timeout_s = max(0.001, min(self.call_timeout_s, context.remaining()))

        async def relay(progress: float, total: float | None, message: str | None) -> None:
            await context.progress(message or f"{self.name}: {tool}", progress, total)

        try:
            result = await session.call_tool(tool, arguments, read_timeout_seconds=timeout_s,
                                             progress_callback=relay)  # fmt: skip
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise TimeoutError_(f"MCP server {self.name!r} did not answer {tool!r} within "
                                    f"{timeout_s:g}s") from None  # fmt: skip
            if exc.code == types.CONNECTION_CLOSED:
                self._mark_lost(f"the connection closed during {tool!r}")
                raise self._unavailable() from None
            details = {"mcp_code": exc.code, "source": self.name}
            message = f"MCP server {self.name!r} refused {tool!r}: {exc.message}"
            raise ProviderError(message, details=details) from None
        except (OSError, httpx2.HTTPError, ConnectionError) as exc:
            self._mark_lost(_describe(exc))
            raise self._unavailable() from None
        except RuntimeError as exc:  # the SDK's output-schema check, among others
            raise ProviderError(f"MCP server {self.name!r}: {tool!r}: {exc}") from None
        return to_tool_result(self.name, tool, result)

    def _mark_lost(self, reason: str) -> None:
        self.last_error = reason
        self.state = LinkState.DOWN
        self._lost.set()

    def _unavailable(self) -> ProviderError:
        if self.state is LinkState.STARTING and self.last_error is None:
            reason = "it is starting"
        else:
            reason = self.last_error or self.state.value
        retry = max(0.0, self.retry_at - time.time()) if self.retry_at else None
        when = f"; next attempt in {retry:.1f}s" if retry is not None else "; reconnecting"
        return ProviderError(f"MCP server {self.name!r} is unavailable: {reason}{when}",
                             retryable=True, retry_after_s=round(retry, 1) if retry else None,
                             details={"source": self.name, "state": self.state.value})  # fmt: skip

    # --- status -------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "transport": self.config.transport,
            "state": self.state.value,
            "tools": len(self.tools),
            "starts": self.starts,
            "failures": self.failures,
            "last_error": self.last_error,
        }
        if self.up_since is not None:
            out["up_s"] = round(time.time() - self.up_since, 1)
        if self.retry_at is not None and self.state is LinkState.DOWN:
            out["retry_in_s"] = round(max(0.0, self.retry_at - time.time()), 1)
        if self.config.transport == "stdio":
            out["log"] = str(self.log_path)
        return out


def _describe(exc: BaseException) -> str:
    """The innermost useful message: anyio wraps failures in exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        if exc.code == types.CONNECTION_CLOSED:
            return "the connection closed (the server exited or dropped it)"
        return f"MCP error {exc.code}: {exc.message}"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, ConnectionError) else text


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def _open_log(path: Path) -> TextIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "a", encoding="utf-8")


def _file_safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
