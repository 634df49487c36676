"""A finished run as one document: what ran, against what, and every call.

The raw JSON file is this document. It carries the per-workload summaries next
to the records so that ``compare`` and the upload read a run without
recomputing it, and a ``format`` tag so a future layout can be told apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exai.baseline.records import CallRecord
from exai.baseline.stats import ToolSummary, summarize

__all__ = ["FORMAT", "ResultError", "RunResult", "load_result"]

FORMAT = "exai-baseline/1"


class ResultError(Exception):
    """A result file that cannot be read as a baseline run."""


@dataclass
class RunResult:
    """``run`` holds identity and context: id, times, URL, server, host, outcome."""

    run: dict[str, Any]
    workloads: list[dict[str, Any]]
    records: list[CallRecord]
    skipped: list[dict[str, str]] = field(default_factory=list)
    summary: dict[str, ToolSummary] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.summary:
            self.summary = summarize(self.records)

    @property
    def run_id(self) -> str:
        return str(self.run.get("id", ""))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "run": self.run,
            "workloads": self.workloads,
            "skipped": self.skipped,
            "summary": {label: s.to_dict() for label, s in self.summary.items()},
            "calls": [r.to_dict() for r in self.records],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        if data.get("format") != FORMAT:
            raise ResultError(f"not an exai baseline result (format {data.get('format')!r})")
        records = [CallRecord.from_dict(r) for r in data.get("calls", [])]
        summary = {k: ToolSummary.from_dict(v) for k, v in data.get("summary", {}).items()}
        return cls(run=data.get("run", {}), workloads=data.get("workloads", []),
                   records=records, skipped=data.get("skipped", []),
                   summary=summary)  # fmt: skip

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")


def load_result(path: Path) -> RunResult:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ResultError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ResultError(f"{path} is not a baseline result")
    try:
        return RunResult.from_dict(data)
    except (TypeError, ResultError) as exc:
        raise ResultError(f"{path}: {exc}") from None
