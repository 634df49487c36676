"""The collector's client: :class:`~exai.client.ExaiClient` with measuring defaults.

The shared client already correlates responses by ``request_id``, keeps many
calls in flight, reconnects with backoff and re-sends calls that were in flight.
This module adds what a measurement needs on top: the defaults the collector
promises (20 MiB frames, 20 s pings, 30 s calls, three connection attempts with
backoff factor 2), retrying calls the daemon marked retryable, and turning each
logical call into one :class:`~exai.baseline.records.CallRecord`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from exai.baseline.records import CLIENT_TIMEOUT, CONNECTION_ERROR, CallRecord
from exai.client import CallStats, ClientError, ExaiClient, RequestFailed
from exai.protocol import CallToolResult, HelloAck, ToolInfo

__all__ = ["BaselineClient", "ClientConfig"]

_MIB = 1024 * 1024


class ClientConfig(BaseModel):
    """Connection and call policy; the ``[client]`` table of a workload file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_frame_bytes: int = Field(default=20 * _MIB, ge=1024)
    ping_interval_s: float | None = Field(default=20.0, gt=0)
    ping_timeout_s: float | None = Field(default=20.0, gt=0)
    open_timeout_s: float = Field(default=10.0, gt=0)
    call_timeout_s: float = Field(default=30.0, gt=0)
    # How long past the daemon's deadline the client still waits for the answer
    # before it records CLIENT_TIMEOUT: the daemon's own TIMEOUT should win.
    wait_margin_s: float = Field(default=5.0, ge=0)
    connect_attempts: int = Field(default=3, ge=1)
    backoff_base_s: float = Field(default=0.5, gt=0)
    backoff_factor: float = Field(default=2.0, ge=1)
    backoff_max_s: float = Field(default=30.0, gt=0)
    reconnect: bool = True
    max_reconnect_attempts: int | None = Field(default=6, ge=1)
    retries: int = Field(default=2, ge=0)

    def backoff_s(self, attempt: int) -> float:
        return min(self.backoff_max_s, self.backoff_base_s * self.backoff_factor**attempt)


class BaselineClient:
    """An ``async with`` client that measures every call it makes.

    One instance holds one connection (one session); concurrent :meth:`measure`
    calls share it, which is how IDE agents use the daemon too.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        config: ClientConfig | None = None,
        *,
        client_name: str = "exai-baseline",
    ) -> None:
        self.config = config or ClientConfig()
        c = self.config
        self.exai = ExaiClient(
            url,
            token,
            client_name=client_name,
            max_frame_bytes=c.max_frame_bytes,
            ping_interval=c.ping_interval_s,
            ping_timeout=c.ping_timeout_s,
            open_timeout=c.open_timeout_s,
            connect_attempts=c.connect_attempts,
            backoff_base_s=c.backoff_base_s,
            backoff_factor=c.backoff_factor,
            backoff_max_s=c.backoff_max_s,
            reconnect=c.reconnect,
            max_reconnect_attempts=c.max_reconnect_attempts,
        )

    async def __aenter__(self) -> BaselineClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> HelloAck:
        return await self.exai.connect()

    async def close(self) -> None:
        await self.exai.close()

    @property
    def url(self) -> str:
        return self.exai.url

    @property
    def hello(self) -> HelloAck | None:
        return self.exai.hello

    @property
    def reconnects(self) -> int:
        return self.exai.reconnects

    @property
    def broken(self) -> ClientError | None:
        """Why this client can never answer again, or ``None`` while it still can."""
        return self.exai.gave_up

    async def list_tools(self) -> list[ToolInfo]:
        return await self.exai.list_tools(timeout_s=self.config.call_timeout_s)

    async def measure(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        workload: str | None = None,
        seq: int = 0,
        stream: bool = False,
        timeout_s: float | None = None,
        retries: int | None = None,
        origin: float = 0.0,
    ) -> CallRecord:
        """Call ``tool`` until it succeeds, fails for good or runs out of retries.

        ``origin`` is the ``time.perf_counter()`` value that ``start_s`` counts
        from. Nothing is raised for a failed call: failure is a measurement too.
        """
        deadline = timeout_s or self.config.call_timeout_s
        allowed = self.config.retries if retries is None else retries
        start = time.perf_counter()
        retried = resends = 0
        while True:
            stats = CallStats()
            request_id = self.exai.new_request_id()
            result, failure = await self._attempt(tool, arguments, request_id, stream,
                                                  deadline, stats)  # fmt: skip
            resends += stats.resends
            error = result.error if result is not None else None
            if error is None or not error.retryable or retried >= allowed:
                break
            await asyncio.sleep(error.retry_after_s or self.config.backoff_s(retried))
            retried += 1
        end = time.perf_counter()

        def since_start(offset_s: float | None) -> float | None:
            if offset_s is None or not stats.sent_at:
                return None
            return (stats.sent_at + offset_s - start) * 1000.0

        error_code = failure
        if result is not None and result.error is not None:
            error_code = result.error.code.value
        return CallRecord(
            workload=workload or tool,
            tool=tool,
            seq=seq,
            request_id=request_id,
            start_s=start - origin,
            latency_ms=(end - start) * 1000.0,
            status="ok" if error_code is None else "error",
            error_code=error_code,
            ack_ms=since_start(stats.ack_s),
            first_chunk_ms=since_start(stats.first_chunk_s),
            server_ms=result.metadata.latency_ms if result is not None else None,
            output_bytes=_output_bytes(result),
            retries=retried,
            resends=resends,
            replayed=bool(result is not None and result.metadata.replayed),
        )

    async def _attempt(
        self,
        tool: str,
        arguments: dict[str, Any] | None,
        request_id: str,
        stream: bool,
        deadline: float,
        stats: CallStats,
    ) -> tuple[CallToolResult | None, str | None]:
        """One ``call_tool``: the daemon's answer, or why there was none."""
        wait_s = deadline + self.config.wait_margin_s
        try:
            # The outer bound also covers waiting for a reconnect before the frame is sent.
            async with asyncio.timeout(wait_s):
                res = await self.exai.call(tool, arguments, request_id=request_id,
                                           timeout_s=deadline, stream=stream, stats=stats,
                                           wait_s=wait_s)  # fmt: skip
            return res, None
        except TimeoutError:
            return None, CLIENT_TIMEOUT
        except RequestFailed as exc:
            return None, exc.error.code.value
        except ClientError:
            return None, CONNECTION_ERROR


def _output_bytes(result: CallToolResult | None) -> int:
    if result is None:
        return 0
    return sum(len(out.text.encode("utf-8")) for out in result.outputs)
