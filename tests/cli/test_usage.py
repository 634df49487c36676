"""``exai usage`` by key and face and with a split, as the operator runs it: the daily sums of
the store the settings name, keys labelled by name, JSON for scripts, a pivot table for
people with bars only on a terminal, and bad combinations refused by name."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import time
from pathlib import Path

from exai.keys import KeyRecord
from exai.store.call_log import CallLogRow
from exai.store.sqlite import SqliteStore
from tests.cli.helpers import EXAI, HANG_S, clean_env, run_exai

DAY = 86400
TODAY = int(time.time() // DAY)


def _call(n: int, day: int, key: str | None, face: str, model: str, cost: int) -> CallLogRow:
    return CallLogRow(
        at=day * DAY + 60.0 + n, instance_id="i", principal="bob" if key else "carol",
        key_id=key, face=face, client=None, tool="chat", model_asked=None, model=model,
        provider="kimi", model_calls=1, session_id="s", request_id=f"r{n}", thread_id=None,
        prompt_tokens=100, completion_tokens=10, currency="USD", cost=cost, latency_ms=1.0,
        status="ok", error_code=None, trace_id=None,
    )  # fmt: skip


async def _seed(path: Path) -> None:
    store = await SqliteStore.open(path)
    try:
        await store.put_key(KeyRecord(
            id="a1b2c3d4e5f6", secret_hash="0" * 64, principal="bob", scopes=None, budget=None,
            rate_per_min=None, models=None, expires_at=None, created_at=time.time(),
            name="<b>laptop</b>",
        ))  # fmt: skip
        await store.record_calls([
            _call(1, TODAY - 1, "a1b2c3d4e5f6", "openai", "kimi-k2.6", 2_000_000_000),
            _call(2, TODAY - 1, "a1b2c3d4e5f6", "openai", "glm-5.1", 1_000_000_000),
            _call(3, TODAY, None, "ws", "kimi-k2.6", 500_000_000),
            _call(4, TODAY - 40, "a1b2c3d4e5f6", "mcp", "kimi-k2.6", 7_000_000_000),
        ])  # fmt: skip
    finally:
        await store.aclose()


def _env(tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path, EXAI_STORE_URL=f"sqlite:///{tmp_path / 'usage.sqlite3'}")


async def test_usage_by_key_and_face_counts_each_call_of_the_period(tmp_path):
    await _seed(tmp_path / "usage.sqlite3")
    env = _env(tmp_path)
    ran = await run_exai("usage", "--by", "key", "--json", env=env, cwd=tmp_path)
    assert ran.code == 0, ran.err
    data = json.loads(ran.out)
    by_key = {g["key"]: g for g in data["groups"]}
    # The call 40 days ago is outside the default 30 days.
    assert by_key["a1b2c3d4e5f6"]["calls"] == 2 and by_key["a1b2c3d4e5f6"]["cost"] == 3.0
    assert by_key["a1b2c3d4e5f6"]["key_name"] == "<b>laptop</b>"
    assert by_key[None]["calls"] == 1 and data["totals"][0]["cost"] == 3.5
    faces = json.loads((await run_exai("usage", "--by", "face", "--days", "90", "--json",
                                       env=env, cwd=tmp_path)).out)  # fmt: skip
    assert {g["face"]: g["calls"] for g in faces["groups"]} == {"openai": 2, "ws": 1, "mcp": 1}


async def test_usage_by_day_split_by_model_is_a_table_of_days_against_models(tmp_path):
    await _seed(tmp_path / "usage.sqlite3")
    env = _env(tmp_path)
    ran = await run_exai("usage", "--by", "day", "--split", "model", "--days", "7",
                         env=env, cwd=tmp_path)  # fmt: skip
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    assert "split by model" in lines[0]
    head = next(line for line in lines if line.startswith("day "))
    assert head.split() == ["day", "glm-5.1", "kimi-k2.6", "total"]
    yesterday = next(line for line in lines if line.startswith(_date(TODAY - 1)))
    assert yesterday.split() == [_date(TODAY - 1), "1.0000", "2.0000", "3.0000"]
    today = next(line for line in lines if line.startswith(_date(TODAY)))
    assert today.split() == [_date(TODAY), "-", "0.5000", "0.5000"]
    assert "█" not in ran.out  # not a terminal: no bars
    data = json.loads((await run_exai("usage", "--by", "day", "--split", "model", "--days", "7",
                                      "--json", env=env, cwd=tmp_path)).out)  # fmt: skip
    assert {(g["day"], g["model"]): g["cost"] for g in data["groups"]} == {
        (_date(TODAY - 1), "glm-5.1"): 1.0, (_date(TODAY - 1), "kimi-k2.6"): 2.0,
        (_date(TODAY), "kimi-k2.6"): 0.5,
    }  # fmt: skip


async def test_on_a_terminal_each_row_has_a_bar(tmp_path):
    await _seed(tmp_path / "usage.sqlite3")
    main, child = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        EXAI, "usage", "--by", "key", env=_env(tmp_path), cwd=tmp_path, stdout=child,
        stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    os.close(child)
    await asyncio.wait_for(proc.wait(), HANG_S)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the terminal's other end closed: all was read
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    text = out.decode()
    row = next(line for line in text.splitlines() if line.startswith("a1b2c3d4e5f6"))
    assert "(<b>laptop</b>)" in row and row.rstrip().endswith("█" * 20)
    assert proc.returncode == 0


async def test_combinations_the_sums_cannot_answer_are_refused_by_name(tmp_path):
    await _seed(tmp_path / "usage.sqlite3")
    env = _env(tmp_path)
    for args, said in (
        (["--by", "tool", "--split", "model"], "exai: --split needs --by one of day, principal"),
        (["--by", "key", "--since", "2026-11-01T12:00"], "exai: since '2026-11-01T12:00': "),
        (["--by", "face", "--days", "1.5"], "exai: days counts whole UTC days"),
        (["--by", "day", "--split", "day"], "exai: usage is already grouped by day"),
    ):  # fmt: skip
        ran = await run_exai("usage", *args, env=env, cwd=tmp_path)
        assert ran.code != 0 and ran.out == "", (args, ran.out)
        assert ran.err.startswith(said), ran.err


def _date(day: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(day * DAY))
