"""Numbers on the command line are parsed, finite and bounded: a value out of
range is one line from the parser naming the option, never a traceback."""

from __future__ import annotations

import pytest

from exai.cli.main import main

CASES = [
    (["usage", "--days", "1e308"], "--days"),
    (["usage", "--days", "inf"], "--days"),
    (["usage", "--days", "nan"], "--days"),
    (["usage", "--days", "-1"], "--days"),
    (["jobs", "add", "echo", "every 1h", "--backoff", "1e999"], "--backoff"),
    (["jobs", "add", "echo", "every 1h", "--timeout", "-5"], "--timeout"),
    (["jobs", "add", "echo", "every 1h", "--max-retries", "99999999999999999999"], "--max-retries"),
    (["jobs", "history", "job_x", "--limit", "0"], "--limit"),
    (["jobs", "history", "job_x", "--limit", "9" * 400], "--limit"),  # no float holds it
    (["call", "echo", "--timeout", "1e308"], "--timeout"),
    (["conversations", "list", "--limit", "-3"], "--limit"),
    (["memory", "list", "--limit", "1e3"], "--limit"),
    (["audit", "tail", "-n", "-1"], "-n"),
    (["serve", "--port", "70000"], "--port"),
    (["token", "issue", "--sub", "a", "--ttl", "1e300"], "--ttl"),
]


@pytest.mark.parametrize(("argv", "option"), CASES)
def test_out_of_range_numbers_are_one_clear_line(argv, option, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXAI_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [x for x in err.splitlines() if "error:" in x]
    assert f"argument {option}" in line and "must be" in line
