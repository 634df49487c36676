"""OpenAI-compatible ``/v1/models`` and ``/v1/chat/completions`` (see routes())."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from exai.daemon.server import Daemon

__all__ = ["routes"]


def routes(daemon: Daemon) -> list[Any]:
    return []
