"""exai's readers against the vendors' own answers: every fixture under
tests/fixtures/vendors/, the verbatim ones from the vendors' pages and examples
(with what exai must make of each) and any ``make vendor-check --record`` wrote
from the live APIs (read by exai as they are read plainly)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .vendor_fixtures import FIXTURES, exai_reading, fixture_paths, load, replay_recorded

VERBATIM = [p for p in fixture_paths() if "recorded" not in p.relative_to(FIXTURES).parts]
RECORDED = fixture_paths(FIXTURES / "recorded")


def _id(path: Path) -> str:
    return str(path.relative_to(FIXTURES))


def test_the_verbatim_fixtures_are_there() -> None:
    kinds = {(load(p)["vendor"], load(p)["kind"]) for p in VERBATIM}
    assert {("kimi", "error"), ("kimi", "completion"), ("glm", "completion"), ("glm", "stream"),
            ("glm", "error")} <= kinds  # fmt: skip


@pytest.mark.parametrize("path", VERBATIM, ids=_id)
def test_exai_reads_what_the_vendor_documents(path: Path) -> None:
    fixture = load(path)
    assert fixture["source"].startswith("https://"), "a verbatim fixture names its page"
    assert exai_reading(fixture) == fixture["expect"]


def test_cached_tokens_are_read_where_each_vendor_puts_them() -> None:
    moonshot = load(FIXTURES / "kimi" / "moonshot_usage_cached_tokens.json")
    zai = load(FIXTURES / "glm" / "zai_stream_tool_call.json")
    assert "prompt_tokens_details" not in moonshot["body"]["usage"]
    assert exai_reading(moonshot)["usage"]["cached_prompt_tokens"] == 10
    assert "cached_tokens" not in zai["chunks"][-1]["usage"]
    assert exai_reading(zai)["usage"]["cached_prompt_tokens"] == 43


@pytest.mark.parametrize("path", RECORDED, ids=_id)
def test_exai_reads_a_recorded_exchange(path: Path) -> None:
    replay_recorded(load(path))
