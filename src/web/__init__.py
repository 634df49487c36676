"""The daemon's HTTP faces: MCP over streamable HTTP at ``/mcp``, and an
OpenAI-compatible ``/v1``, on a listener of their own beside the WebSocket.

They reach the dispatcher in process (:mod:`exai.web.local`), with the same
principals, limits, audit and results as a WebSocket client; ``/mcp`` serves
the same MCP handlers and result translation as the stdio shim.
"""

from exai.web.app import WebFace

__all__ = ["WebFace"]
