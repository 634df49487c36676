"""Tools that need no model: ``version``, ``status``, ``listmodels`` and ``echo``."""

from __future__ import annotations

import asyncio
import json
import platform
from typing import Any

from pydantic import Field

from exai import __version__
from exai.protocol import PROTOCOL_VERSION
from exai.redact import mask_url_credentials
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult

__all__ = ["TOOLS", "EchoTool", "ListModelsTool", "StatusTool", "VersionTool"]


class _NoInput(ToolInput):
    pass


class VersionTool(Tool):
    name = "version"
    description = "exai server version, protocol version and platform."
    Input = _NoInput
    profile = "lean"
    always_on = True

    async def run(self, arguments: _NoInput, context: ToolContext) -> ToolResult:
        info = {
            "server": "exai",
            "version": __version__,
            "protocol": PROTOCOL_VERSION,
            "python": platform.python_version(),
        }
        return ToolResult(json.dumps(info), metadata={"info": info})


class StatusTool(Tool):
    name = "status"
    description = "Daemon health: uptime, sessions, calls in flight, limits, providers."
    Input = _NoInput
    profile = "lean"
    always_on = True

    async def run(self, arguments: _NoInput, context: ToolContext) -> ToolResult:
        services = context.services
        snapshot: dict[str, Any] = services.stats() if services.stats else {}
        if services.providers is not None:
            snapshot["providers"] = services.providers.status()
        if services.memory is not None:
            snapshot["memory"] = services.memory.status()
        # The snapshot quotes errors from other libraries (the audit sink's, a bridged
        # server's), which may name a URL with its credentials.
        text = mask_url_credentials(json.dumps(snapshot, default=str))
        return ToolResult(text, metadata={"status": json.loads(text)})


class ListModelsTool(Tool):
    name = "listmodels"
    description = (
        "List the Kimi and GLM models exai can call, their aliases, prices per million "
        "tokens, and whether each provider is configured."
    )
    Input = _NoInput
    profile = "lean"
    always_on = True

    async def run(self, arguments: _NoInput, context: ToolContext) -> ToolResult:
        providers = context.services.providers
        models: list[dict[str, Any]] = providers.describe_models() if providers else []
        if not models:
            return ToolResult("No models: no provider plugin is installed.", {"models": []})
        lines = [
            f"{m['name']}  provider={m['provider']}  "
            f"configured={'yes' if m['configured'] else 'no'}  "
            f"context={m.get('context_window', '?')}  price={_price(m.get('price'))}"
            for m in models
        ]
        return ToolResult("\n".join(lines), metadata={"models": models})


class EchoInput(ToolInput):
    text: str = Field(default="", description="Returned unchanged.")
    delay_s: float = Field(default=0.0, ge=0, le=3600, description="Sleep before answering.")
    stream_chunks: int = Field(default=0, ge=0, le=1000, description="Stream text in N chunks.")


class EchoTool(Tool):
    name = "echo"
    description = "Returns its input; for load tests and connectivity checks."
    Input = EchoInput
    profile = "lean"

    async def run(self, arguments: EchoInput, context: ToolContext) -> ToolResult:
        if arguments.delay_s:
            await asyncio.sleep(arguments.delay_s)
        n = arguments.stream_chunks
        if n and context.stream_requested:
            text = arguments.text
            step = max(1, -(-len(text) // n))
            for i in range(0, len(text), step):
                await context.stream(text[i : i + step])
        return ToolResult(arguments.text)


TOOLS: list[Tool] = [VersionTool(), StatusTool(), ListModelsTool(), EchoTool()]


def _price(price: dict[str, Any] | None) -> str:
    """``in/cached/out CUR per 1M tokens``, or ``unpriced``."""
    if not price:
        return "unpriced"
    rates = "/".join(f"{price[k]:g}" for k in ("input", "cached_input", "output"))
    return f"{rates} {price['currency']} per 1M tokens (input/cached/output)"
