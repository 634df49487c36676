"""The shim asks its MCP client for roots and the daemon applies them, end to end.

The official SDK client speaks the handshake revision here, where the shim
asks with ``roots/list``; the 2026-07-28 path (``input_required``) is what the
real Claude Code takes, in tests/clients.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import types

from tests.shim.helpers import mcp_session, shim_env


def _roots_callback(*paths: Path) -> Any:
    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri()) for p in paths])

    return list_roots


def _review(path: Path) -> dict[str, Any]:
    return {"step": "look", "step_number": 1, "total_steps": 2, "next_step_required": True,
            "findings": "-", "relevant_files": [str(path)]}  # fmt: skip


def _project(tmp_path: Path, name: str) -> Path:
    project = tmp_path / name
    project.mkdir()
    (project / "main.py").write_text("print('hi')\n")
    return project


async def test_a_project_the_client_declares_is_readable_on_a_loopback_daemon(
    daemon_process, tmp_path: Path
):
    daemon = daemon_process()  # default roots: the home directory, which tmp_path is not in
    project = _project(tmp_path, "project")
    elsewhere = _project(tmp_path, "elsewhere")
    async with mcp_session(shim_env(daemon), elsewhere) as mcp:
        refused = await mcp.call_tool("codereview", _review(project / "main.py"))
    assert refused.is_error and "FORBIDDEN" in refused.content[0].text

    async with mcp_session(shim_env(daemon), elsewhere,
                           list_roots_callback=_roots_callback(project)) as mcp:  # fmt: skip
        res = await mcp.call_tool("codereview", _review(project / "main.py"))
        other = await mcp.call_tool("codereview", _review(elsewhere / "main.py"))
    assert not res.is_error, res.content[0].text
    assert other.is_error and "FORBIDDEN" in other.content[0].text


async def test_allowed_roots_is_a_ceiling_the_client_only_narrows(daemon_process, tmp_path):
    ceiling = _project(tmp_path, "ceiling")
    inside = _project(ceiling, "app")
    outside = _project(tmp_path, "outside")
    daemon = daemon_process(EXAI_ALLOWED_ROOTS=str(ceiling))
    callback = _roots_callback(inside, outside)
    async with mcp_session(shim_env(daemon), tmp_path, list_roots_callback=callback) as mcp:
        ok = await mcp.call_tool("codereview", _review(inside / "main.py"))
        narrowed = await mcp.call_tool("codereview", _review(ceiling / "main.py"))
        widened = await mcp.call_tool("codereview", _review(outside / "main.py"))
    assert not ok.is_error, ok.content[0].text
    assert narrowed.is_error and "FORBIDDEN" in narrowed.content[0].text
    assert widened.is_error and "FORBIDDEN" in widened.content[0].text


async def test_policy_refusals_stay_inside_a_client_root(daemon_process, tmp_path: Path):
    project = _project(tmp_path, "project")
    (project / ".ssh").mkdir()
    (project / ".ssh" / "id_rsa").write_text("key")
    (project / "escape.py").symlink_to("/etc/passwd")
    daemon = daemon_process()
    callback = _roots_callback(project, Path("/"))
    async with mcp_session(shim_env(daemon), tmp_path, list_roots_callback=callback) as mcp:
        for path in (project / ".ssh" / "id_rsa", project / "escape.py", Path("/etc/passwd")):
            res = await mcp.call_tool("codereview", _review(path))
            assert res.is_error and "FORBIDDEN" in res.content[0].text, (path, res.content)


async def test_without_the_roots_capability_the_shims_working_directory_counts(
    daemon_process, tmp_path: Path
):
    """Codex 0.169.0 declares no roots but starts the shim in the project it has open."""
    daemon = daemon_process()
    project = _project(tmp_path, "project")
    other = _project(tmp_path, "other")
    async with mcp_session(shim_env(daemon), project) as mcp:
        res = await mcp.call_tool("codereview", _review(project / "main.py"))
        refused = await mcp.call_tool("codereview", _review(other / "main.py"))
    assert not res.is_error, res.content[0].text
    assert refused.is_error and "FORBIDDEN" in refused.content[0].text
