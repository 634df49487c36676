"""Helpers shared by the baseline collector tests."""

from __future__ import annotations

from typing import Any

from exai.baseline.client import ClientConfig
from exai.baseline.progress import Progress
from exai.baseline.records import CallRecord
from exai.baseline.results import RunResult
from exai.baseline.workload import Workload, WorkloadSet
from exai.emulators.ports import free_port as free_port

__all__ = ["RecordingProgress", "fast_client", "free_port", "synthetic_run", "workloads"]


def fast_client(**overrides: Any) -> ClientConfig:
    """Collector defaults with short backoffs, so retry paths cost tenths of a second."""
    values: dict[str, Any] = {"backoff_base_s": 0.1, "backoff_max_s": 1.0, "call_timeout_s": 10}
    values.update(overrides)
    return ClientConfig(**values)


def workloads(*entries: dict[str, Any], client: ClientConfig | None = None,
              parallel: bool = False) -> WorkloadSet:  # fmt: skip
    return WorkloadSet(name="test", parallel=parallel, client=client or fast_client(),
                       workload=[Workload(**e) for e in entries])  # fmt: skip


class RecordingProgress(Progress):
    """Keeps what the runner reported, and calls ``on_record`` with each record."""

    def __init__(self, on_record: Any = None) -> None:
        self.total: int | None = -1
        self.begun: list[str] = []
        self.records: list[CallRecord] = []
        self.on_record = on_record

    def start(self, total: int | None) -> None:
        self.total = total

    def begin(self, label: str, planned: int | None) -> None:
        self.begun.append(label)

    def advance(self, record: CallRecord) -> None:
        self.records.append(record)
        if self.on_record is not None:
            self.on_record(record)


def synthetic_run(
    latencies_ms: dict[str, list[float]],
    errors: dict[str, list[str]] | None = None,
    run_id: str = "run",
) -> RunResult:
    """A finished run with the given latencies per workload, calls back to back."""
    records: list[CallRecord] = []
    clock = 0.0

    def add(label: str, ms: float, error_code: str | None = None) -> None:
        nonlocal clock
        seq = sum(1 for r in records if r.workload == label)
        records.append(
            CallRecord(
                workload=label,
                tool="echo",
                seq=seq,
                request_id=f"{label}-{seq}",
                start_s=clock,
                latency_ms=ms,
                status="ok" if error_code is None else "error",
                error_code=error_code,
                ack_ms=ms / 10,
                server_ms=ms / 2,
                output_bytes=5 if error_code is None else 0,
            )
        )
        clock += ms / 1000

    for label, values in latencies_ms.items():
        for ms in values:
            add(label, ms)
        for code in (errors or {}).get(label, []):
            add(label, 1.0, code)
    run = {
        "id": run_id,
        "name": "synthetic",
        "started_at": "2026-01-01T00:00:00+00:00",
        "duration_s": clock,
        "url": "ws://127.0.0.1:1",
        "server": {"name": "exai", "version": "0"},
        "reconnects": 0,
    }
    return RunResult(run=run, workloads=[], records=records)
