"""Workload files: what to call, how often, how many at once, as validated TOML.

A file holds run-wide settings, an optional ``[client]`` table (see
:class:`~exai.baseline.client.ClientConfig`) and one ``[[workload]]`` table per
load to apply::

    name = "default"
    parallel = false          # true: all workloads at once; false: one after another

    [[workload]]
    tool = "echo"
    name = "echo-100ms"       # label in reports; defaults to the tool name
    arguments = { text = "hi", delay_s = 0.1 }
    iterations = 100          # stop after this many calls ...
    duration_s = 30           # ... or after this long, whichever comes first
    concurrency = 8           # calls in flight at once
    ramp_up_s = 2             # workers start evenly spread over this period
    optional = false          # true: skip (not fail) when the daemon lacks the tool

Validation happens on load, so a typo fails before a daemon is contacted.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from exai.baseline.client import ClientConfig

__all__ = ["Workload", "WorkloadError", "WorkloadSet", "load_workloads", "parse_workloads"]


class WorkloadError(Exception):
    """A workload file that cannot be read or does not validate."""


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(min_length=1)
    name: str | None = Field(default=None, min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    iterations: int | None = Field(default=None, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    concurrency: int = Field(default=1, ge=1, le=10_000)
    ramp_up_s: float = Field(default=0.0, ge=0)
    stream: bool = False
    timeout_s: float | None = Field(default=None, gt=0)
    retries: int | None = Field(default=None, ge=0)
    optional: bool = False

    @model_validator(mode="after")
    def _bounded(self) -> Workload:
        if self.iterations is None and self.duration_s is None:
            raise ValueError(f"workload {self.label!r} needs iterations or duration_s (or both)")
        return self

    @property
    def label(self) -> str:
        return self.name or self.tool


class WorkloadSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "baseline"
    description: str = ""
    parallel: bool = False
    client: ClientConfig = Field(default_factory=ClientConfig)
    workload: list[Workload] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_labels(self) -> WorkloadSet:
        seen: set[str] = set()
        for w in self.workload:
            if w.label in seen:
                raise ValueError(f"two workloads are labelled {w.label!r}; give one a `name`")
            seen.add(w.label)
        return self


def parse_workloads(text: str, source: str = "<workload>") -> WorkloadSet:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadError(f"{source}: not valid TOML: {exc}") from None
    try:
        return WorkloadSet.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_input=False):
            where = ".".join(str(p) for p in err["loc"]) or "(file)"
            problems.append(f"{where}: {err['msg']}")
        listed = "\n  ".join(problems)
        raise WorkloadError(f"{source}: invalid workload file:\n  {listed}") from None


def load_workloads(path: Path) -> WorkloadSet:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkloadError(f"cannot read workload file {path}: {exc.strerror}") from None
    return parse_workloads(text, str(path))
