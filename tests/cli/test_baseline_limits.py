"""``exai baseline --url`` against a daemon whose rate limiter cuts into the run: said up
front, and the run ends non-zero naming the setting, instead of a table of RATE_LIMITED."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import clean_env, run_exai

WORKLOAD = """
name = "busy"
[client]
retries = 0
[[workload]]
tool = "version"
iterations = 240
concurrency = 4
"""


async def test_a_rate_limited_baseline_fails_and_names_the_setting(tmp_path: Path, daemon_factory):
    daemon = await daemon_factory(rate_limit_per_min=60, rate_limit_burst=20)
    (tmp_path / "w.toml").write_text(WORKLOAD)
    ran = await run_exai("baseline", "--url", daemon.url, "--workload", str(tmp_path / "w.toml"),
                         "--out", str(tmp_path / "out"), "--no-charts", "--no-progress",
                         env=clean_env(tmp_path))  # fmt: skip
    assert "this workload makes 240 calls" in ran.err  # said before it ran
    assert ran.code == 1, ran.err
    assert "refused by the daemon's rate limiter (RATE_LIMITED)" in ran.err
    assert "EXAI_RATE_LIMIT_PER_MIN=0" in ran.err


async def test_an_unlimited_daemon_measures_cleanly(tmp_path: Path, daemon_factory):
    daemon = await daemon_factory(rate_limit_per_min=0)
    (tmp_path / "w.toml").write_text(WORKLOAD)
    ran = await run_exai("baseline", "--url", daemon.url, "--workload", str(tmp_path / "w.toml"),
                         "--out", str(tmp_path / "out"), "--no-charts", "--no-progress",
                         env=clean_env(tmp_path))  # fmt: skip
    assert ran.code == 0, ran.err
    assert "rate limiter (RATE_LIMITED)" not in ran.err
