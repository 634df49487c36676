"""The core of the daemon: sessions, dispatch, the run of a call, and the port the faces use."""

from exai.daemon.core import Core

__all__ = ["Core"]
