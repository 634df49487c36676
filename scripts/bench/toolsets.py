"""The ``tools/list`` payload of each tool profile, in bytes and estimated tokens.

An IDE agent pays for every tool description and schema in its context window
on every turn, whether or not it calls the tool, so the size of the list is a
cost the profiles exist to control. The payload measured is the ``tools`` array
exactly as the daemon sends it in ``list_tools_res`` (compact JSON, which is
also what the shim passes on as MCP ``tools/list``), built from the real
registry: the tools installed through the ``exai.tools`` entry points, enabled
or not by ``EXAI_TOOL_PROFILE`` and the allow and deny lists. Tokens are the
``generic`` estimate of :mod:`exai.store.tokens`, which never undercounts (JSON
punctuation is priced at a token a character, so real tokenizers count less).

``tests/tools/test_profiles.py`` keeps the ``standard`` profile under
:data:`STANDARD_BUDGET_TOKENS`; docs/toolsets.md explains the choice.

Run: ``python -m scripts.bench.toolsets`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

from exai.settings import Settings
from exai.store.tokens import estimator_for
from exai.tools.registry import ToolRegistry

__all__ = ["PROFILES", "STANDARD_BUDGET_TOKENS", "main", "measure", "registry_for"]

PROFILES = ("lean", "standard", "full")
STANDARD_BUDGET_TOKENS = 16_000


def registry_for(profile: str, **overrides: Any) -> ToolRegistry:
    """The registry a daemon would build for ``profile``, isolated from the environment."""
    values: dict[str, Any] = {"tool_profile": profile, "tools_allow": [], "tools_deny": [],
                              "data_dir": tempfile.gettempdir()}  # fmt: skip
    values.update(overrides)
    return ToolRegistry.from_entry_points(Settings(_env_file=None, **values))


def measure(registry: ToolRegistry) -> dict[str, Any]:
    """Bytes and estimated tokens of the registry's ``tools/list`` payload, and per tool."""
    estimate = estimator_for("generic").text
    infos = [info.model_dump(mode="json") for info in registry.infos()]
    payload = json.dumps(infos, separators=(",", ":"), ensure_ascii=False)
    per_tool = {}
    for info in infos:
        text = json.dumps(info, separators=(",", ":"), ensure_ascii=False)
        per_tool[info["name"]] = {"bytes": len(text.encode()), "tokens": estimate(text)}
    return {"tools": [i["name"] for i in infos], "bytes": len(payload.encode()),
            "tokens": estimate(payload), "per_tool": per_tool}  # fmt: skip


def main() -> dict[str, Any]:
    figures = {profile: measure(registry_for(profile)) for profile in PROFILES}
    print("## tools/list payload per profile\n")
    print(f"Estimated tokens never undercount; the `standard` budget is "
          f"{STANDARD_BUDGET_TOKENS:,}.\n")  # fmt: skip
    print("| profile | tools | bytes | est. tokens |\n|---|---:|---:|---:|")
    for profile, f in figures.items():
        print(f"| {profile} | {len(f['tools'])} | {f['bytes']:,} | {f['tokens']:,} |")
    print("\n| tool | bytes | est. tokens | profiles |\n|---|---:|---:|---|")
    full = figures["full"]["per_tool"]
    for name, size in sorted(full.items(), key=lambda kv: -kv[1]["tokens"]):
        within = ", ".join(p for p in PROFILES if name in figures[p]["tools"])
        print(f"| {name} | {size['bytes']:,} | {size['tokens']:,} | {within} |")
    return {p: {k: v for k, v in f.items() if k != "per_tool"} for p, f in figures.items()}


if __name__ == "__main__":
    main()
