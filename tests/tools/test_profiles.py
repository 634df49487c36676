"""Tool profiles, allow and deny lists, and the size of what ``tools/list`` costs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exai.protocol import ErrorCode
from exai.tools.base import Tool, ToolInput, ToolResult
from exai.tools.registry import ToolRegistry, discover_tools
from scripts.bench.toolsets import STANDARD_BUDGET_TOKENS, measure, registry_for
from tests.conftest import make_settings, running_daemon

DOC = Path(__file__).resolve().parents[2] / "docs" / "toolsets.md"
ALWAYS_ON = {"version", "status", "listmodels", "artifact"}


def _tool(name: str, profile: str, always_on: bool = False) -> Tool:
    class _Fake(Tool):
        description = "fake"
        Input = ToolInput

        async def run(self, arguments, context):  # pragma: no cover - never called
            return ToolResult("")

    _Fake.name, _Fake.profile, _Fake.always_on = name, profile, always_on  # type: ignore[assignment]
    return _Fake()


FAKES = [_tool("light", "lean"), _tool("common", "standard"), _tool("rare", "full"),
         _tool("needed", "full", always_on=True)]  # fmt: skip


def _enabled(tmp_path, **overrides) -> set[str]:
    return set(ToolRegistry(make_settings(tmp_path, **overrides), FAKES).names())


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"tool_profile": "lean"}, {"light", "needed"}),
        ({"tool_profile": "standard"}, {"light", "common", "needed"}),
        ({"tool_profile": "full"}, {"light", "common", "rare", "needed"}),
        ({"tool_profile": "lean", "tools_allow": ["rare"]}, {"light", "rare", "needed"}),
        ({"tool_profile": "full", "tools_deny": ["common", "needed"]}, {"light", "rare", "needed"}),
        ({"tool_profile": "full", "tools_allow": ["rare"], "tools_deny": ["rare"]},
         {"light", "common", "needed"}),
    ],
    ids=["lean", "standard", "full", "allow-adds", "deny-removes-but-not-always-on",
         "deny-beats-allow"],
)  # fmt: skip
def test_profile_allow_and_deny_choose_the_tools(tmp_path, overrides, expected):
    assert _enabled(tmp_path, **overrides) == expected


def test_lists_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("EXAI_TOOL_PROFILE", "lean")
    monkeypatch.setenv("EXAI_TOOLS_ALLOW", "common, rare")
    monkeypatch.setenv("EXAI_TOOLS_DENY", "rare")
    assert _enabled(tmp_path) == {"light", "common", "needed"}


def _documented() -> dict[str, str]:
    rows = re.findall(
        r"^\| `([a-z_]+)` \| (always on|lean|standard|full) \|", DOC.read_text(), re.M
    )
    return dict(rows)


def test_every_installed_tool_is_in_the_profile_its_documentation_gives(tmp_path):
    documented = _documented()
    assert {name for name, where in documented.items() if where == "always on"} == ALWAYS_ON
    for tool in discover_tools(make_settings(tmp_path)):
        actual = "always on" if tool.always_on else tool.profile
        assert tool.name in documented, f"{tool.name} is missing from docs/toolsets.md"
        assert documented[tool.name] == actual, (
            f"{tool.name}: docs/toolsets.md says {documented[tool.name]!r}, the tool says "
            f"{actual!r}; set its `profile` ClassVar (or change the documented mapping)"
        )


def test_the_real_profiles_nest_and_keep_the_always_on_tools():
    lean, standard, full = (set(registry_for(p).names()) for p in ("lean", "standard", "full"))
    assert ALWAYS_ON | {"chat"} <= lean <= standard <= full
    assert "consensus" in standard - lean
    denied = set(registry_for("full", tools_deny=sorted(full)).names())
    assert denied == ALWAYS_ON


def test_the_standard_profile_stays_under_its_token_budget():
    size = measure(registry_for("standard"))
    heaviest = sorted(size["per_tool"].items(), key=lambda kv: -kv[1]["tokens"])[:3]
    assert size["tokens"] <= STANDARD_BUDGET_TOKENS, (
        f"tools/list for the standard profile is ~{size['tokens']:,} tokens, over the "
        f"{STANDARD_BUDGET_TOKENS:,} budget (docs/toolsets.md); heaviest: {heaviest}"
    )


def _titles(node: object) -> list[str]:
    if isinstance(node, dict):
        own = [v for k, v in node.items() if k == "title" and isinstance(v, str)]
        return own + [t for v in node.values() for t in _titles(v)]
    if isinstance(node, list):
        return [t for item in node for t in _titles(item)]
    return []


def test_schemas_carry_no_generated_titles():
    for info in registry_for("full").infos():
        assert _titles(info.inputSchema) == [], info.name


async def test_a_lean_daemon_lists_and_serves_only_lean_tools(tmp_path, client_factory):
    async with running_daemon(make_settings(tmp_path, tool_profile="lean")) as daemon:
        client = await client_factory(daemon)
        listed = {t.name for t in await client.list_tools()}
        assert listed == set(registry_for("lean").names())
        assert "consensus" not in listed
        res = await client.call("consensus", {"prompt": "x", "models": []})
        assert res.error.code == ErrorCode.TOOL_NOT_FOUND
