"""Uploading a run's summary through the real supabase client to the PostgREST emulator."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest

from exai.baseline.stats import OVERALL
from exai.baseline.upload import TABLE, UploadError, upload_summary
from tests.baseline.helpers import synthetic_run

postgrest = pytest.importorskip("exai.emulators.postgrest")

KEY = "sb-service-role-key-for-baseline-tests"
MIGRATIONS = Path(__file__).parents[2] / "supabase" / "migrations"


def _table_from_migration() -> postgrest.Table:
    """The emulator's table, read from the shipped migration so the two cannot drift."""
    (path,) = MIGRATIONS.glob("*_performance_baselines.sql")
    body = re.search(r"create table if not exists public\.performance_baselines \((.*?)\n\);",
                     path.read_text(), re.S).group(1)  # fmt: skip
    columns, required = [], set()
    for line in body.splitlines():
        match = re.match(r"\s+(\w+)\s+\w+", line)
        if match and match.group(1) != "primary":
            columns.append(match.group(1))
            if "not null" in line and "default" not in line:
                required.add(match.group(1))
    return postgrest.Table(columns=tuple(columns), key=("run_id", "workload"),
                           required=frozenset(required))  # fmt: skip


@pytest.fixture
def emulator():
    server = postgrest.PostgrestEmulator({TABLE: _table_from_migration()}, api_key=KEY)
    server.start()
    yield server
    server.stop()


async def test_summary_rows_are_stored_once_per_workload(emulator):
    run = synthetic_run({"echo": [1.0, 2.0], "slow": [100.0]}, errors={"slow": ["TIMEOUT"]},
                        run_id="6f1c1c2e-8b7e-4d6a-9a53-3b1f0f2b1a10")  # fmt: skip
    assert await upload_summary(run, emulator.url, KEY) == 3
    rows = {row["workload"]: row for row in emulator.rows(TABLE)}
    assert set(rows) == {"echo", "slow", OVERALL}
    assert rows["slow"]["errors_by_code"] == {"TIMEOUT": 1} and rows["slow"]["success_rate"] == 0.5
    assert rows["echo"]["p50_ms"] == 1.5 and rows[OVERALL]["run"]["url"] == "ws://127.0.0.1:1"
    (write,) = emulator.writes(TABLE)
    assert "resolution=ignore-duplicates" in write.prefer

    await upload_summary(run, emulator.url, KEY)  # the same file again stores nothing twice
    assert len(emulator.rows(TABLE)) == 3


async def test_a_refused_upload_says_why(emulator):
    with pytest.raises(UploadError, match="Invalid API key"):
        await upload_summary(synthetic_run({"echo": [1.0]}), emulator.url, "wrong-key")
    emulator.fail(503)
    with pytest.raises(UploadError, match="PGRST000"):
        await upload_summary(synthetic_run({"echo": [1.0]}), emulator.url, KEY)


async def test_exai_baseline_upload_uses_the_audit_sink_settings(emulator, tmp_path):
    path = tmp_path / "baseline.json"
    synthetic_run({"echo": [1.0]}, run_id="0b0e8f55-3f4e-4b8e-a4d8-8a1d5e1f2c3d").save(path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPABASE_")}
    args = ("-m", "exai.cli.main", "baseline", "upload", str(path))

    code, err = await _cli(args, {**env, "SUPABASE_URL": emulator.url,
                                  "SUPABASE_SERVICE_ROLE_KEY": KEY})  # fmt: skip
    assert code == 0, err
    assert {row["workload"] for row in emulator.rows(TABLE)} == {"echo", OVERALL}

    code, err = await _cli(args, env)
    assert code == 1 and "SUPABASE_URL and SUPABASE_SERVICE_ROLE_KEY" in err


async def _cli(args: tuple[str, ...], env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, env=env, cwd=str(Path(__file__).parent),  # no .env here
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    return proc.returncode or 0, err.decode()
