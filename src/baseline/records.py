"""One measured call: the row every other part of the collector reads.

A :class:`CallRecord` is plain data so that it can be written to JSON and CSV and
read back without the client that produced it. Times are milliseconds, except
``start_s``, which places the call on the run's timeline (seconds since the run
started) so charts can show throughput and errors over time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

__all__ = ["CLIENT_TIMEOUT", "CONNECTION_ERROR", "CSV_FIELDS", "CallRecord", "Status"]

Status = Literal["ok", "error"]

# Failures the daemon never reported because no answer arrived; they sit beside the
# protocol's error codes in "errors by code" so one table shows every way a call failed.
CLIENT_TIMEOUT = "CLIENT_TIMEOUT"
CONNECTION_ERROR = "CONNECTION_ERROR"


@dataclass(slots=True)
class CallRecord:
    """What one logical call cost, including the attempts it took to get an answer.

    ``retries`` counts calls issued again by the collector after a retryable error
    (a fresh ``request_id`` each time); ``resends`` counts frames the client sent
    again with the same ``request_id`` after reconnecting. ``latency_ms`` spans
    the whole logical call, retries and waits for a connection included, which is
    what the caller of a tool experiences. ``ack_ms`` and ``first_chunk_ms`` count
    from the same start, for the attempt that produced the answer.
    """

    workload: str
    tool: str
    seq: int
    request_id: str
    start_s: float
    latency_ms: float
    status: Status
    error_code: str | None = None
    ack_ms: float | None = None
    first_chunk_ms: float | None = None
    server_ms: float | None = None
    output_bytes: int = 0
    retries: int = 0
    resends: int = 0
    replayed: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def end_s(self) -> float:
        return self.start_s + self.latency_ms / 1000.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


CSV_FIELDS: list[str] = [f.name for f in fields(CallRecord)]
