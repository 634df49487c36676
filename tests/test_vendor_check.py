"""``make vendor-check`` (scripts/vendor_check.py) without real keys: with none it
says what it would check; with fake keys and the endpoints pointed at the provider
emulator it runs every check and reports each in its format, and ``--record``
writes fixtures with the keys masked that the replay test reads.

The emulator is a stand-in still learning the vendors' documented rules, so a
check may not hold against it yet; "holds" is asserted only for the rules it
enforces today (a fixed temperature, a tool round without its reasoning, retired
preview ids).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from exai.emulators.provider import EmulatorServer
from scripts.vendor_check import select
from scripts.vendor_checks.glm import tool_stream_shape
from tests.providers.vendor_fixtures import fixture_paths, load, replay_recorded

ROOT = Path(__file__).resolve().parent.parent
KIMI_KEY = "sk-kimi-fake-7f3a9c2e1b4d"
GLM_KEY = "glm-fake-5d8e2a7b9c.x1y2z3w4"
_VENDOR_ENV = ("KIMI_API_KEY", "MOONSHOT_API_KEY", "KIMI_BASE_URL", "GLM_API_KEY", "ZAI_API_KEY",
               "ZHIPUAI_API_KEY", "GLM_BASE_URL", "XDG_CONFIG_HOME")  # fmt: skip
LINE = re.compile(
    r"^(?P<name>[a-z]+\.[a-z0-9_]+) \[(?P<model>[^\]]+)\]: "
    r"(?P<status>holds|does not hold|observed|skipped|error)(?: \((?P<detail>.*)\))?$"
)


def _vendor_check(
    home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """``python -m scripts.vendor_check`` with no key of the developer's: the vendor
    variables cleared, a fresh HOME (no ~/.config/exai/env) and working directory
    (no .env)."""
    clean = {k: v for k, v in os.environ.items()
             if k not in _VENDOR_ENV and not k.startswith("EXAI_")}  # fmt: skip
    clean.update(HOME=str(home), PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "scripts.vendor_check", *args], cwd=home, env=clean,
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_without_keys_it_says_what_it_would_check(tmp_path: Path) -> None:
    done = _vendor_check(tmp_path)
    assert done.returncode == 0, done.stderr
    first, *rest = done.stdout.splitlines()
    assert first == "no KIMI_API_KEY or GLM_API_KEY: nothing checked; with keys it would check:"
    for check in select():
        assert f"  {check.name} [{check.model}]: {check.rule}" in rest


def test_without_a_glm_key_the_glm_checks_are_named(tmp_path: Path) -> None:
    done = _vendor_check(tmp_path, "--vendor", "glm", env={"KIMI_API_KEY": KIMI_KEY})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no GLM_API_KEY: nothing checked")
    assert "glm.tool_stream [glm-5.1]" in done.stdout
    assert "kimi." not in done.stdout


def test_list_names_each_check_with_its_rule_and_source(tmp_path: Path) -> None:
    done = _vendor_check(tmp_path, "--list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines == [f"{c.name} [{c.model}]: {c.rule} ({c.source})" for c in select()]
    assert all(c.source for c in select())


# Tool calls the emulated model makes when asked to look the word up, so the
# tool-round checks have a round to answer (one per request that asks).
_LOOKUP = {"tool_calls": [{"name": "lookup_word", "arguments": {"word": "apple"}}],
           "when": {"offers_tool": "lookup_word", "last_role": "user"}}  # fmt: skip


@pytest.fixture(scope="module")
def emulated_run(
    provider_emulator: EmulatorServer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One run of every check, with fake keys, against the emulator, recording."""
    provider_emulator.reset()
    provider_emulator.script(*[dict(_LOOKUP) for _ in range(12)])
    home = tmp_path_factory.mktemp("vendor-check")
    record = home / "recorded"
    env = {"KIMI_API_KEY": KIMI_KEY, "GLM_API_KEY": GLM_KEY,
           "KIMI_BASE_URL": provider_emulator.base_url_kimi,
           "GLM_BASE_URL": provider_emulator.base_url_glm}  # fmt: skip
    done = _vendor_check(home, "--record", str(record), env=env)
    provider_emulator.reset()
    return done, record


def _reported(output: str) -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for text in output.splitlines():
        match = LINE.match(text)
        if match:
            key = (match["name"], match["model"])
            assert key not in found, f"{key} reported twice"
            found[key] = match.groupdict()
    return found


def test_every_check_runs_and_is_reported(
    emulated_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    done, _ = emulated_run
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 2: a check had an error
    reported = _reported(done.stdout)
    assert set(reported) == {(c.name, c.model) for c in select()}
    errors = {k: v["detail"] for k, v in reported.items() if v["status"] == "error"}
    assert not errors
    skipped = {k: v["detail"] for k, v in reported.items() if v["status"] == "skipped"}
    assert all(skipped.values()), "a skipped check says why"
    assert re.search(r"^summary: \d+ checks: ", done.stdout, re.MULTILINE)
    for key in (KIMI_KEY, GLM_KEY):
        assert key not in done.stdout + done.stderr


@pytest.mark.parametrize("name, model", [
    ("kimi.fixed_temperature", "kimi-k2.6"),
    ("kimi.tool_round_needs_reasoning", "kimi-k2.6"),
    ("kimi.tool_round_needs_reasoning", "kimi-k2.7-code"),
    ("kimi.retired_preview_id", "kimi-k2-0905-preview"),
])  # fmt: skip
def test_the_rules_the_emulator_enforces_hold(
    emulated_run: tuple[subprocess.CompletedProcess[str], Path], name: str, model: str
) -> None:
    done, _ = emulated_run
    assert _reported(done.stdout)[(name, model)]["status"] == "holds", done.stdout


def test_record_writes_fixtures_without_the_keys_that_replay(
    emulated_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    done, record = emulated_run
    paths = fixture_paths(record)
    assert paths and {p.parent.name for p in paths} == {"kimi", "glm"}
    assert f"recorded {len(paths)} exchanges under {record}" in done.stdout
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert KIMI_KEY not in text and GLM_KEY not in text, path
        assert "Bearer" not in text and "authorization" not in text.lower(), path
        fixture = load(path)
        assert fixture["source"].startswith("recorded by `make vendor-check`")
        replay_recorded(fixture)
    kinds = {load(p)["kind"] for p in paths}
    assert {"completion", "stream", "error"} <= kinds


def test_the_tool_stream_shape_says_how_a_call_arrived() -> None:
    # As a third party saw GLM stream a call (lingua#318), with the name repeated too.
    def piece(finish: str | None = None, **call: Any) -> dict[str, Any]:
        choice = {"index": 0, "delta": {"tool_calls": [{"index": 0, **call}]}}
        return {"choices": [{**choice, "finish_reason": finish}]}

    chunks = [
        piece(id="call_1", type="function", function={"name": "lookup_word", "arguments": '{"wo'}),
        piece(id="call_1", function={"name": "lookup_word", "arguments": 'rd": "ap'}),
        piece("tool_calls", id="call_1", function={"arguments": 'ple"}'}),
    ]
    assert tool_stream_shape(chunks) == {
        "pieces": 3,
        "first_piece_has_arguments": True,
        "id_repeated": True,
        "name_repeated": True,
        "arguments_on_finish_chunk": True,
        "name": "lookup_word",
        "id": "call_1",
        "arguments": '{"word": "apple"}',
    }
    assert tool_stream_shape([{"choices": [{"index": 0, "delta": {"content": "hi"}}]}]) == {}
