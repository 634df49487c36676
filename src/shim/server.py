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
import warnings
from collections.abc import Mapping
from typing import Any

import pydantic
from mcp import types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from exai import __version__, tracing
from exai.client import ClientError, ExaiClient, HelloRefused, RequestFailed
from exai.logs import get_logger
from exai.protocol import ErrorCode, ErrorInfo, ProgressFrame, StreamChunk, ToolInfo
from exai.shim.roots import ProcessRoots, RootsSource
from exai.shim.translate import (
    ProgressCounter,
    error_to_mcp,
    result_to_mcp,
    tool_to_mcp,
    tools_fingerprint,
)
from exai.tracing import state as tracing_state

__all__ = ["Shim"]

log = get_logger("exai.shim")

_HINT = "start it with `exai serve`, or set EXAI_SHIM_AUTOSTART=true"


class Shim:
    """Forwards MCP ``tools/list`` and ``tools/call`` to the daemon behind ``client``."""

    face = "mcp-stdio"  # exai.face on this face's spans

    def __init__(
        self,
        client: ExaiClient | None,
        *,
        connect_wait_s: float = 10.0,
        tools_poll_s: float = 30.0,
        roots: RootsSource | None = None,
    ) -> None:
        self.client = client
        self.roots = roots or ProcessRoots(connect_wait_s)
        self.connect_wait_s = connect_wait_s
        self.tools_poll_s = tools_poll_s
        self._fingerprint: tuple[Any, ...] | None = None
        self._peer: ServerSession | None = None
        self._background: set[asyncio.Task[Any]] = set()
        if client is not None:
            client.on_reconnect = self._on_reconnect

    def build_server(self) -> Server[Any]:
        with warnings.catch_warnings():
            # roots/list_changed is deprecated in 2026-07-28, but handshake-era clients send it.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
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
        client = self.client_for(ctx)
        try:
            await client.wait_connected(self.connect_wait_s)
            tools = await client.list_tools()
        except (ClientError, TimeoutError) as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=_unreachable(client, exc)) from None
        finally:
            self.release(client)
        self._fingerprint = tools_fingerprint(tools)
        return types.ListToolsResult(tools=[tool_to_mcp(t) for t in tools])

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        roots = await self.roots.get(ctx, params)
        if isinstance(roots, types.InputRequiredResult):
            return roots
        client = self.client_for(ctx)
        try:
            return await self._call(client, ctx, params, roots)
        finally:
            self.release(client)

    async def _call(
        self,
        client: Any,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        roots: list[str],
    ) -> types.CallToolResult:
        """The call, under this face's span when tracing is on: its parent is the
        trace context the client put in ``_meta`` (MCP's convention), else the
        transport's (:meth:`trace_parent`)."""
        meta = _meta(ctx.params)
        if tracing_state.tracer is None:
            # Not traced here: the caller's context still goes on to the daemon.
            return await self._forward(client, ctx, params, roots, _trace_of(meta))
        with tracing.span(
            f"tools/call {params.name}",
            kind=tracing.SERVER,
            parent=tracing.extract_from(meta) or self.trace_parent(ctx),
            attributes={"exai.face": self.face, "mcp.method.name": "tools/call",
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": params.name,
                        "mcp.protocol.version": ctx.protocol_version,
                        "jsonrpc.request.id": None if ctx.request_id is None
                        else str(ctx.request_id)},
        ) as span:  # fmt: skip
            result = await self._forward(client, ctx, params, roots, tracing.carrier())
            if result.is_error and span is not None and span.is_recording():
                # MCP's convention; the exai code was set where the error was known.
                span.set_attribute("error.type", "tool_error")
            return result

    def trace_parent(self, ctx: ServerRequestContext[Any]) -> Any:
        """The transport's trace context, when ``_meta`` carries none (stdio has none)."""
        return None

    async def _forward(
        self,
        client: Any,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        roots: list[str],
        trace: dict[str, str],
    ) -> types.CallToolResult:
        progress = _progress_token(ctx.params) is not None
        try:
            await client.wait_connected(self.connect_wait_s)
        except ClientError as exc:
            return error_to_mcp(_client_error(client, exc))
        relay = _ProgressRelay(ctx.session) if progress else None
        request_id = client.new_request_id()
        try:
            res = await client.call(
                params.name,
                params.arguments or {},
                request_id=request_id,
                stream=progress,
                on_progress=relay,
                on_chunk=relay,
                roots=roots or None,
                trace=trace or None,
            )
        except asyncio.CancelledError:
            # notifications/cancelled (or the client went away): stop the daemon's task too.
            self._spawn(client.cancel(request_id))
            raise
        except TimeoutError:
            message = f"no answer from the exai daemon for {params.name}"
            return error_to_mcp(ErrorInfo(code=ErrorCode.TIMEOUT, message=message, retryable=True))
        except pydantic.ValidationError as exc:  # not a valid call_tool frame (name too long...)
            message = f"invalid call: {exc.errors(include_url=False)[0]['msg']}"
            return error_to_mcp(ErrorInfo(code=ErrorCode.INVALID_REQUEST, message=message))
        except ClientError as exc:
            return error_to_mcp(_client_error(client, exc))
        if res.error is not None:
            tracing.fail_current(res.error)
        return result_to_mcp(res)

    def client_for(self, ctx: ServerRequestContext[Any]) -> Any:
        """The daemon client that serves this request: the shim has one WebSocket for all."""
        return self.client

    def release(self, client: Any) -> None:
        """Called when a request is done with ``client``."""

    async def _on_roots_changed(
        self, ctx: ServerRequestContext[Any], params: types.NotificationParams | None
    ) -> None:
        self.roots.changed(ctx)

    # --- tools/list_changed ---------------------------------------------------

    def _remember_peer(self, ctx: ServerRequestContext[Any]) -> None:
        # Unsolicited notifications exist only in the handshake era; a 2026-07-28
        # client subscribes instead, and has no connection to notify here.
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._peer = ctx.session

    async def check_tools(self) -> bool:
        """Fetch the daemon's tools; tell the MCP client if they changed. True if they did."""
        assert self.client is not None  # the stdio shim's WebSocket client
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
        assert self.client is not None
        while True:
            await asyncio.sleep(self.tools_poll_s)
            if self.client.connected and self._fingerprint is not None:
                try:
                    await self.check_tools()
                except (ClientError, TimeoutError) as exc:
                    log.debug("tool poll failed", error=str(exc))

    def _on_reconnect(self) -> None:
        assert self.client is not None
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


def _meta(params: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    meta = (params or {}).get("_meta")
    return meta if isinstance(meta, Mapping) else None


def _progress_token(params: Mapping[str, Any] | None) -> Any:
    meta = _meta(params)
    return meta.get("progressToken") if meta is not None else None


def _trace_of(meta: Mapping[str, Any] | None) -> dict[str, str]:
    """The W3C trace context a client put in ``_meta``, to pass on; a malformed one
    is dropped here (W3C: ignored), since the daemon would refuse it."""
    context = tracing.extract_from(meta)
    return tracing.carrier(context) if context is not None else {}


def _unreachable(client: Any, exc: BaseException) -> str:
    if isinstance(exc, HelloRefused):
        return (
            f"the exai daemon at {client.url} refused the token: {exc}. Set EXAI_WS_TOKEN "
            "(or --token) to a token the daemon accepts and restart the MCP server"
        )
    return f"the exai daemon is not reachable at {client.url} ({exc}); {_HINT}"


def _client_error(client: Any, exc: BaseException) -> ErrorInfo:
    if isinstance(exc, RequestFailed):
        return exc.error
    if isinstance(exc, HelloRefused):
        return ErrorInfo(code=ErrorCode.UNAUTHORIZED, message=_unreachable(client, exc))
    return ErrorInfo(code=ErrorCode.INTERNAL_ERROR, message=_unreachable(client, exc),
                     retryable=True)  # fmt: skip
