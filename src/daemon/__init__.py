"""The exai daemon: protocol v1 over WebSocket, sessions, dispatch, limits, health."""

from exai.daemon.server import Daemon

__all__ = ["Daemon"]
