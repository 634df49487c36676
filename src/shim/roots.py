"""Where an MCP face learns the calling IDE's workspace roots.

A handshake-era client answers ``roots/list`` on the spot. A 2026-07-28
client (Claude Code) has no server-to-client requests: a call returns
``input_required`` for the roots, and the client retries it with them. How
long an answer holds depends on the face:

* :class:`ProcessRoots`, for the stdio shim: one process serves one IDE window,
  so the roots are asked for once. A client without the capability (Codex
  0.169.0) starts the shim in the project it has open, so the working directory
  stands in.
* :class:`SessionRoots`, for the daemon's own ``/mcp``: one daemon serves many
  windows, so the roots are kept per MCP session, and a stateless 2026-07-28
  client is asked on every call.
* :class:`NoRoots`, for a daemon that ignores client roots (not on loopback).
"""

from __future__ import annotations

import asyncio
import os
import warnings
import weakref
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlparse

from mcp import types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from exai.logs import get_logger

__all__ = ["NoRoots", "ProcessRoots", "RootsSource", "SessionRoots", "root_paths"]

log = get_logger("exai.shim")

_ROOTS_INPUT = "exai/roots"
_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"

Answer = list[str] | types.InputRequiredResult


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


def _declares_roots(ctx: ServerRequestContext[Any]) -> bool:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        meta = (ctx.params or {}).get("_meta")
        caps = meta.get(_CAPABILITIES) if isinstance(meta, Mapping) else None
        return isinstance(caps, Mapping) and "roots" in caps
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and capabilities.roots is not None


class RootsSource:
    """Asks the client for its roots; subclasses decide how long an answer holds."""

    def __init__(self, ask_timeout_s: float = 10.0) -> None:
        self.ask_timeout_s = ask_timeout_s

    async def get(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> Answer:
        raise NotImplementedError

    def changed(self, ctx: ServerRequestContext[Any]) -> None:
        """``notifications/roots/list_changed``: forget what was cached."""

    async def ask(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> Answer | None:
        """The client's answer; ``input_required`` to ask for it; None if it has no roots."""
        if not _declares_roots(ctx):
            return None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            answer = (params.input_responses or {}).get(_ROOTS_INPUT)
            if answer is None:
                return types.InputRequiredResult(
                    input_requests={_ROOTS_INPUT: types.ListRootsRequest()}
                )
            listed = getattr(answer, "roots", None)  # None: the client declined
            return root_paths(listed) if listed is not None else []
        try:
            async with asyncio.timeout(self.ask_timeout_s):
                with warnings.catch_warnings():  # deprecated in 2026-07-28, not for this client
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    result = await ctx.session.list_roots()
        except Exception as exc:  # a client that cannot answer is a client without roots
            log.warning("the MCP client did not list its roots", error=repr(exc))
            return []
        return root_paths(result.roots)


class ProcessRoots(RootsSource):
    def __init__(self, ask_timeout_s: float = 10.0) -> None:
        super().__init__(ask_timeout_s)
        self._roots: list[str] | None = None

    async def get(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> Answer:
        if self._roots is not None:
            return self._roots
        answer = await self.ask(ctx, params)
        if isinstance(answer, types.InputRequiredResult):
            return answer
        if answer is None:
            cwd = os.getcwd()
            answer = [] if cwd == os.sep else [cwd]
        self._roots = answer
        log.info("the MCP client's roots", roots=answer)
        return answer

    def changed(self, ctx: ServerRequestContext[Any]) -> None:
        self._roots = None


def _mcp_session(ctx: ServerRequestContext[Any]) -> Any:
    """What one MCP session's requests share. ``ctx.session`` is made anew for each
    request; the connection behind it lives as long as the MCP session (the SDK
    keeps it private, so this is read with a fallback that caches nothing)."""
    return getattr(ctx.session, "_connection", None)


class SessionRoots(RootsSource):
    def __init__(self, ask_timeout_s: float = 10.0) -> None:
        super().__init__(ask_timeout_s)
        self._by_session: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()

    async def get(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> Answer:
        key = _mcp_session(ctx) if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS else None
        if key is not None and key in self._by_session:
            return self._by_session[key]
        answer = await self.ask(ctx, params)
        if answer is None:
            return []
        if key is not None and not isinstance(answer, types.InputRequiredResult):
            self._by_session[key] = answer
        return answer

    def changed(self, ctx: ServerRequestContext[Any]) -> None:
        key = _mcp_session(ctx)
        if key is not None:
            self._by_session.pop(key, None)


class NoRoots(RootsSource):
    async def get(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> Answer:
        return []
