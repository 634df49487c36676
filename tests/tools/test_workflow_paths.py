"""Every file-taking workflow tool refuses paths outside the allowed roots before
anything is stored or any model is asked."""

from __future__ import annotations

import pytest

from exai.protocol import ErrorCode
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.tools.workflow_helpers import WORKFLOW_TOOLS, step, tool_extras


@pytest.fixture
def layout(tmp_path):
    """An allowed root holding a symlink to a secret file just outside it."""
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT\n")
    (root / "escape.txt").symlink_to(secret)
    (root / "escape_dir").symlink_to(outside, target_is_directory=True)
    (root / "ok.py").write_text("x = 1\n")
    return root


def bad_paths(root) -> list[tuple[str, ErrorCode]]:
    return [
        ("/root/../etc/passwd", ErrorCode.FORBIDDEN),
        (f"{root}/../outside/secret.txt", ErrorCode.FORBIDDEN),
        (str(root / "escape.txt"), ErrorCode.FORBIDDEN),
        (str(root / "escape_dir" / "secret.txt"), ErrorCode.FORBIDDEN),
        ("ok.py", ErrorCode.VALIDATION_ERROR),
        ("./root/ok.py", ErrorCode.VALIDATION_ERROR),
    ]


@pytest.mark.parametrize("tool", WORKFLOW_TOOLS)
async def test_paths_outside_the_roots_are_refused(tool, layout, emulator, client_factory):
    settings = make_settings(layout, **emulated_providers(emulator), tool_profile="full")
    extras = tool_extras(tool, layout)
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        for path, code in bad_paths(layout):
            for field in ("files_checked", "relevant_files"):
                # A single final step: without the check, the file would go to the model.
                args = step(1, 1, final=True, tool=tool, **{field: [str(layout / "ok.py"), path]},
                            **extras)  # fmt: skip
                result = await client.call(tool, args)
                assert result.error is not None, (path, field)
                assert result.error.code == code, (path, field, result.error)
                assert path in result.error.message
        assert await daemon.services.store.list_threads() == []
    assert emulator.requests == []


async def test_a_symlink_inside_the_roots_is_followed(layout, emulator, client_factory):
    (layout / "alias.py").symlink_to(layout / "ok.py")
    settings = make_settings(layout, **emulated_providers(emulator))
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        result = await client.call("codereview", step(
            1, 1, final=True, relevant_files=[str(layout / "alias.py")]
        ))  # fmt: skip
        assert result.error is None, result.error
    assert "x = 1" in str(emulator.requests[0]["body"]["messages"])
    assert "TOP-SECRET" not in str(emulator.requests[0]["body"]["messages"])
