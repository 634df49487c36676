"""An asyncio client for protocol v1, shared by everything that talks to a daemon.

One :class:`ExaiClient` holds one WebSocket and any number of calls in flight.
A single reader task receives every frame and routes it by ``request_id`` to the
call that is waiting for it (the demultiplexer), so ``progress`` and
``stream_chunk`` frames reach the right callback and results may arrive in any
order. With ``reconnect=True`` a lost connection is re-established with
exponential backoff and jitter, ``hello`` resumes the same session, and every
call still waiting is sent again with the same ``request_id``; the daemon's
replay cache makes that safe (a finished call is answered from the cache, a
running one is attached to).

``exai call``, ``exai shim``, the baseline collector, the benchmarks and the
tests all use this package: :mod:`~exai.client.api` is the client's requests,
:mod:`~exai.client.connection` the connection and its reconnects,
:mod:`~exai.client.demux` the demultiplexer, :mod:`~exai.client.errors` what can
fail.
"""

from __future__ import annotations

from exai.client.api import ExaiClient
from exai.client.demux import CallStats, ChunkCallback, ProgressCallback
from exai.client.errors import ClientError, ConnectError, HelloRefused, RequestFailed

__all__ = [
    "CallStats",
    "ChunkCallback",
    "ClientError",
    "ConnectError",
    "ExaiClient",
    "HelloRefused",
    "ProgressCallback",
    "RequestFailed",
]
