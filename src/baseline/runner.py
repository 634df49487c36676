"""Running a workload set against a daemon and collecting one record per call.

The tools a workload set names are checked against the daemon's ``list_tools``
before the first call, so a typo or a tool the daemon lacks stops the run with
nothing sent. Each workload runs ``concurrency`` workers on one shared
connection; workers start spread over ``ramp_up_s`` and stop when the
iterations are used up or ``duration_s`` has passed. If the connection is lost
for good the run stops early and says so in ``run["aborted"]``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import platform
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from exai.baseline.client import BaselineClient
from exai.baseline.progress import Progress
from exai.baseline.records import CallRecord
from exai.baseline.results import RunResult
from exai.baseline.workload import Workload, WorkloadSet

__all__ = ["Plan", "UnknownToolsError", "check_tools", "run_workloads"]


class UnknownToolsError(Exception):
    """The workload set names tools the daemon does not offer."""

    def __init__(self, missing: list[str], available: list[str], url: str) -> None:
        names = ", ".join(repr(m) for m in missing)
        super().__init__(
            f"the daemon at {url} has no tool {names}; it offers: {', '.join(available)}. "
            "Fix the workload file, or mark the workload `optional = true` to skip it."
        )
        self.missing = missing
        self.available = available


@dataclass(frozen=True)
class Plan:
    runnable: list[Workload]
    skipped: list[dict[str, str]]


async def check_tools(client: BaselineClient, workloads: WorkloadSet) -> Plan:
    """Split the workloads into those to run and optional ones to skip, or refuse."""
    available = sorted(t.name for t in await client.list_tools())
    offered = set(available)
    missing = [w.tool for w in workloads.workload if w.tool not in offered and not w.optional]
    if missing:
        raise UnknownToolsError(list(dict.fromkeys(missing)), available, client.url)
    runnable = [w for w in workloads.workload if w.tool in offered]
    skipped = [
        {"workload": w.label, "tool": w.tool, "reason": "the daemon does not list this tool"}
        for w in workloads.workload
        if w.tool not in offered
    ]
    return Plan(runnable, skipped)


async def run_workloads(
    client: BaselineClient,
    workloads: WorkloadSet,
    *,
    progress: Progress | None = None,
    context: dict[str, Any] | None = None,
) -> RunResult:
    """Check the tools, run every workload, and return the whole run.

    Raises :class:`UnknownToolsError` before any call is made. ``context`` is
    merged into ``run`` (the workload file's path, for instance).
    """
    plan = await check_tools(client, workloads)
    progress = progress or Progress()
    planned = [w.iterations for w in plan.runnable]
    progress.start(None if None in planned else sum(p or 0 for p in planned))
    records: list[CallRecord] = []
    started_at = datetime.now(UTC)
    origin = time.perf_counter()
    if workloads.parallel:
        for w in plan.runnable:
            progress.begin(w.label, w.iterations)
        await asyncio.gather(
            *(_run_one(client, w, origin, records, progress) for w in plan.runnable)
        )
    else:
        for w in plan.runnable:
            if client.broken is not None:
                break
            progress.begin(w.label, w.iterations)
            await _run_one(client, w, origin, records, progress)
    progress.close()
    duration = time.perf_counter() - origin
    run = _describe_run(client, workloads, started_at, duration)
    run.update(context or {})
    return RunResult(run=run, workloads=[w.model_dump(mode="json") for w in plan.runnable],
                     records=records, skipped=plan.skipped)  # fmt: skip


async def _run_one(
    client: BaselineClient,
    w: Workload,
    origin: float,
    records: list[CallRecord],
    progress: Progress,
) -> None:
    seqs = itertools.count()
    stop_at = time.perf_counter() + w.duration_s if w.duration_s is not None else None

    async def worker(index: int) -> None:
        if w.ramp_up_s:
            await asyncio.sleep(index * w.ramp_up_s / w.concurrency)
        while client.broken is None:
            if stop_at is not None and time.perf_counter() >= stop_at:
                return
            seq = next(seqs)
            if w.iterations is not None and seq >= w.iterations:
                return
            record = await client.measure(w.tool, w.arguments, workload=w.label, seq=seq,
                                          stream=w.stream, timeout_s=w.timeout_s,
                                          retries=w.retries, origin=origin)  # fmt: skip
            records.append(record)
            progress.advance(record)

    await asyncio.gather(*(worker(i) for i in range(w.concurrency)))


def _describe_run(
    client: BaselineClient, workloads: WorkloadSet, started_at: datetime, duration_s: float
) -> dict[str, Any]:
    hello = client.hello
    server = hello.server.model_dump() if hello is not None and hello.server else {}
    limits = hello.limits.model_dump() if hello is not None and hello.limits else {}
    return {
        "id": str(uuid.uuid4()),
        "name": workloads.name,
        "description": workloads.description,
        "started_at": started_at.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "duration_s": duration_s,
        "url": client.url,
        "parallel": workloads.parallel,
        "server": server,
        "limits": limits,
        "client": client.config.model_dump(mode="json"),
        "host": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "reconnects": client.reconnects,
        "aborted": str(client.broken) if client.broken is not None else None,
    }
