"""The WebSocket face: protocol v1 on ``EXAI_WS_PORT`` (with ``/health``, ``/ready``
and ``/metrics`` answered on the same port), over the core's port."""

from exai.ws.server import WebSocketFace

__all__ = ["WebSocketFace"]
