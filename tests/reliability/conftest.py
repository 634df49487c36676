"""The reliability suite: long fault-injection runs against a daemon in a subprocess.

These tests run only when asked for with ``-m reliability`` (``make reliability``);
a plain ``pytest`` or ``make test`` deselects them here, before any fixture runs.

Each test records the figures it measured through the ``figures`` fixture. At the
end of the session they are written to ``build/reliability/figures.json`` (or
``$EXAI_RELIABILITY_RESULTS/figures.json``), replacing the last run's, and rendered
as markdown beside it by :mod:`scripts.reliability.report`; ``docs/reliability.md``
quotes that table.

``EXAI_RELIABILITY_SCALE`` (default 1) multiplies client counts, example counts
and durations, so a developer can run the whole suite at a tenth of its size.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from exai.emulators.postgrest import PostgrestEmulator
from exai.emulators.provider import EmulatorServer
from tests.reliability.harness import AUDIT_TABLE, results_dir, scale

SUPABASE_KEY = "sb-reliability-service-role-key-7f3e9a1c"
_SESSION: dict[str, Any] = {}  # start time and outcomes of this run


@pytest.fixture
def postgrest() -> Iterator[PostgrestEmulator]:
    """The Supabase (PostgREST) fixture that the audit trail ships to."""
    server = PostgrestEmulator({"audit_events": AUDIT_TABLE}, api_key=SUPABASE_KEY).start()
    yield server
    server.stop()


@pytest.fixture
def emulator(provider_emulator: EmulatorServer) -> EmulatorServer:
    """The session's provider emulator, with its script, log and config reset."""
    provider_emulator.reset()
    return provider_emulator


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect reliability tests unless the ``-m`` expression names ``reliability``."""
    if "reliability" in (config.getoption("markexpr") or ""):
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("reliability") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class Figures:
    """Figures measured by the tests, by section; written once the session ends."""

    def __init__(self) -> None:
        self.sections: dict[str, dict[str, Any]] = {}

    def record(self, section: str, **values: Any) -> None:
        self.sections.setdefault(section, {}).update(values)

    def add(self, section: str, key: str, amount: int = 1) -> None:
        entry = self.sections.setdefault(section, {})
        entry[key] = entry.get(key, 0) + amount


_FIGURES = Figures()


@pytest.fixture(scope="session")
def figures() -> Iterator[Figures]:
    yield _FIGURES


def pytest_sessionstart(session: pytest.Session) -> None:
    _SESSION["started"] = time.monotonic()
    _SESSION["outcomes"] = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "reliability" not in report.keywords:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcomes = _SESSION.setdefault("outcomes", {})
        outcomes[report.outcome] = outcomes.get(report.outcome, 0) + 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _FIGURES.sections:
        return
    from scripts.reliability.report import render

    out = results_dir()
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "run": {
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "duration_s": round(time.monotonic() - _SESSION.get("started", time.monotonic()), 1),
            "scale": scale(),
            "tests": _SESSION.get("outcomes", {}),
            "exit_status": int(exitstatus),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "command": "make reliability",
        },
        "sections": _FIGURES.sections,
    }
    (out / "figures.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    (out / "figures.md").write_text(render(data))
