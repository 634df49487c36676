"""The MCP side of the shim: a low-level MCP ``Server`` whose handlers call the daemon.

Every MCP request becomes one protocol request on the single WebSocket held by
an :class:`~exai.client.ExaiClient`, whose demultiplexer routes each answer,
``progress`` and ``stream_chunk`` back to the handler waiting for that
``request_id``; many MCP calls therefore run at once over one connection. The
client reconnects forever and re-sends calls in flight with their original
``request_id``, which the daemon's replay makes safe.

Failures are results, not exceptions: the SDK does not turn an exception in a
``tools/call`` handler into a tool error, so every daemon error (and an
unreachable daemon) comes back as a ``CallToolResult`` with ``is_error`` set.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlparse

import pydantic
from mcp import types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from exai import __version__
from exai.client import ClientError, ExaiClient, HelloRefused, RequestFailed
from exai.logs import get_logger
from exai.protocol import ErrorCode, ErrorInfo, ProgressFrame, StreamChunk, ToolInfo
from exai.shim.translate import (
    ProgressCounter,
    error_to_mcp,
    result_to_mcp,
    tool_to_mcp,
    tools_fingerprint,
)

__all__ = ["Shim"]

log = get_logger("exai.shim")

_HINT = "start it with `exai serve`, or set EXAI_SHIM_AUTOSTART=true"
_ROOTS_INPUT = "exai/roots"
_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"


class Shim:
    """Forwards MCP ``tools/list`` and ``tools/call`` to the daemon behind ``client``."""

    def __init__(
        self, client: ExaiClient, *, connect_wait_s: float = 10.0, tools_poll_s: float = 30.0
    ) -> None:
        self.client = client
        self.connect_wait_s = connect_wait_s
        self.tools_poll_s = tools_poll_s
        self._fingerprint: tuple[Any, ...] | None = None
        self._peer: ServerSession | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._roots: list[str] | None = None
        client.on_reconnect = self._on_reconnect

    def build_server(self) -> Server[Any]:
        server: Server[Any] = Server(
            "exai",
            version=__version__,
            instructions="Tools of the exai daemon (Kimi and GLM models).",
            on_list_tools=self._on_list_tools,
            on_call_tool=self._on_call_tool,
            on_roots_list_changed=self._on_roots_changed,
        )
        # The only default middleware is OpenTelemetry's, a span per message that goes
        # nowhere unless an exporter is installed; the shim's budget is under a millisecond.
        server.middleware.clear()
        return server

    @staticmethod
    def initialization_options(server: Server[Any]) -> Any:
        return server.create_initialization_options(NotificationOptions(tools_changed=True))

    # --- handlers -----------------------------------------------------------

    async def _on_list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember_peer(ctx)
        try:
            await self.client.wait_connected(self.connect_wait_s)
            tools = await self.client.list_tools()
        except (ClientError, TimeoutError) as exc:
            raise MCPError(
                code=types.INTERNAL_ERROR, message=_unreachable(self.client, exc)
            ) from None
        self._fingerprint = tools_fingerprint(tools)
        return types.ListToolsResult(tools=[tool_to_mcp(t) for t in tools])

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        roots = await self._client_roots(ctx, params)
        if isinstance(roots, types.InputRequiredResult):
            return roots
        progress = _progress_token(ctx.params) is not None
        try:
            await self.client.wait_connected(self.connect_wait_s)
        except ClientError as exc:
            return error_to_mcp(_client_error(self.client, exc))
        relay = _ProgressRelay(ctx.session) if progress else None
        request_id = self.client.new_request_id()
        try:
            res = await self.client.call(
                params.name,
                params.arguments or {},
                request_id=request_id,
                stream=progress,
                on_progress=relay,
                on_chunk=relay,
                roots=roots or None,
            )
        except asyncio.CancelledError:
            # notifications/cancelled (or the client went away): stop the daemon's task too.
            self._spawn(self.client.cancel(request_id))
            raise
        except TimeoutError:
            message = f"no answer from the exai daemon for {params.name}"
            return error_to_mcp(ErrorInfo(code=ErrorCode.TIMEOUT, message=message, retryable=True))
        except pydantic.ValidationError as exc:  # not a valid call_tool frame (name too long...)
            message = f"invalid call: {exc.errors(include_url=False)[0]['msg']}"
            return error_to_mcp(ErrorInfo(code=ErrorCode.INVALID_REQUEST, message=message))
        except ClientError as exc:
            return error_to_mcp(_client_error(self.client, exc))
        return result_to_mcp(res)

    # --- roots ----------------------------------------------------------------

    async def _client_roots(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> list[str] | types.InputRequiredResult:
        """The client's workspace roots as absolute paths, asked for once per shim.

        A handshake-era client answers ``roots/list`` on the spot. A 2026-07-28
        client (Claude Code) has no server-to-client requests: the first call
        returns ``input_required`` for its roots, and the client retries that
        call with them. A client without the capability (Codex 0.169.0) starts
        the shim in the project it has open, so the working directory stands in.
        """
        if self._roots is not None:
            return self._roots
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            if "roots" not in _client_capabilities(ctx.params):
                return self._working_directory()
            answer = (params.input_responses or {}).get(_ROOTS_INPUT)
            if answer is None:
                return types.InputRequiredResult(
                    input_requests={_ROOTS_INPUT: types.ListRootsRequest()}
                )
            listed = getattr(answer, "roots", None)
            if listed is None:  # the client declined: call on without its roots
                return []
            self._roots = root_paths(listed)
        else:
            capabilities = ctx.session.client_capabilities
            if capabilities is None or capabilities.roots is None:
                return self._working_directory()
            try:
                async with asyncio.timeout(self.connect_wait_s):
                    result = await ctx.session.list_roots()
            except Exception as exc:  # a client that cannot answer is a client without roots
                log.warning("the MCP client did not list its roots", error=repr(exc))
                self._roots = []
                return []
            self._roots = root_paths(result.roots)
        log.info("the MCP client's roots", roots=self._roots)
        return self._roots

    def _working_directory(self) -> list[str]:
        """The shim's working directory as the client's root, unless it is ``/``."""
        cwd = os.getcwd()
        self._roots = [] if cwd == os.sep else [cwd]
        return self._roots

    async def _on_roots_changed(
        self, ctx: ServerRequestContext[Any], params: types.NotificationParams | None
    ) -> None:
        self._roots = None

    # --- tools/list_changed ---------------------------------------------------

    def _remember_peer(self, ctx: ServerRequestContext[Any]) -> None:
        # Unsolicited notifications exist only in the handshake era; a 2026-07-28
        # client subscribes instead, and has no connection to notify here.
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._peer = ctx.session

    async def check_tools(self) -> bool:
        """Fetch the daemon's tools; tell the MCP client if they changed. True if they did."""
        tools: list[ToolInfo] = await self.client.list_tools()
        fingerprint = tools_fingerprint(tools)
        changed = self._fingerprint is not None and fingerprint != self._fingerprint
        self._fingerprint = fingerprint
        if changed and self._peer is not None:
            log.info("daemon tools changed; notifying the MCP client", tools=len(tools))
            await self._peer.send_tool_list_changed()
        return changed

    async def watch_tools(self) -> None:
        """Poll the tool list; the daemon has no push for it, and a list costs one frame."""
        while True:
            await asyncio.sleep(self.tools_poll_s)
            if self.client.connected and self._fingerprint is not None:
                try:
                    await self.check_tools()
                except (ClientError, TimeoutError) as exc:
                    log.debug("tool poll failed", error=str(exc))

    def _on_reconnect(self) -> None:
        log.info("connected to the daemon", url=self.client.url, session_id=self.client.session_id)
        if self._fingerprint is not None:
            self._spawn(self._check_after_reconnect())

    async def _check_after_reconnect(self) -> None:
        try:
            await self.check_tools()
        except (ClientError, TimeoutError) as exc:
            log.warning("listing tools after reconnect failed", error=str(exc))

    # --- housekeeping -----------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self, timeout_s: float = 2.0) -> None:
        """Let cancels and notifications already started go out before exiting."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=timeout_s)


class _ProgressRelay:
    """Daemon progress and chunks of one call, as MCP progress on that call's token."""

    __slots__ = ("counter", "session")

    def __init__(self, session: ServerSession) -> None:
        self.session = session
        self.counter = ProgressCounter()

    async def __call__(self, frame: ProgressFrame | StreamChunk) -> None:
        value, message = self.counter.from_frame(frame)
        try:
            await self.session.report_progress(value, None, message)
        except Exception as exc:  # runs on the client's reader: never let it die
            log.debug("progress not delivered", error=repr(exc))


def root_paths(roots: list[types.Root]) -> list[str]:
    """The local directories among MCP roots (``file://`` URIs), as absolute paths."""
    paths: list[str] = []
    for root in roots:
        parsed = urlparse(str(root.uri))
        if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
            path = unquote(parsed.path)
            if os.path.isabs(path) and path not in paths:
                paths.append(path)
    return paths


def _client_capabilities(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (params or {}).get("_meta")
    caps = meta.get(_CAPABILITIES) if isinstance(meta, Mapping) else None
    return caps if isinstance(caps, Mapping) else {}


def _progress_token(params: Mapping[str, Any] | None) -> Any:
    meta = (params or {}).get("_meta")
    return meta.get("progressToken") if isinstance(meta, Mapping) else None


def _unreachable(client: ExaiClient, exc: BaseException) -> str:
    if isinstance(exc, HelloRefused):
        return (
            f"the exai daemon at {client.url} refused the token: {exc}. Set EXAI_WS_TOKEN "
            "(or --token) to a token the daemon accepts and restart the MCP server"
        )
    return f"the exai daemon is not reachable at {client.url} ({exc}); {_HINT}"


def _client_error(client: ExaiClient, exc: BaseException) -> ErrorInfo:
    if isinstance(exc, RequestFailed):
        return exc.error
    if isinstance(exc, HelloRefused):
        return ErrorInfo(code=ErrorCode.UNAUTHORIZED, message=_unreachable(client, exc))
    return ErrorInfo(code=ErrorCode.INTERNAL_ERROR, message=_unreachable(client, exc),
                     retryable=True)  # fmt: skip
