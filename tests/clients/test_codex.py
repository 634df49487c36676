"""What only Codex does: offer MCP tools up front, for a model it has no metadata for.

The scenarios every real client goes through are in test_real_clients.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exai.emulators.provider import EmulatorServer
from tests.clients.codex import DIRECT_MODEL, Codex
from tests.clients.install import codex_binary
from tests.clients.scenarios import (
    chat_turns,
    check_chat_turns,
)
from tests.clients.scripted import Script
from tests.shim.helpers import DaemonProcess

pytestmark = pytest.mark.timeout(300)


def test_model_sees_chat_when_codex_offers_the_tools_up_front(
    tmp_path: Path, project: Path, client_daemon: DaemonProcess, provider_emulator: EmulatorServer
) -> None:
    """For a model it has no metadata for, Codex lists MCP tools directly, without tool_search."""
    provider_emulator.reset()
    client = Codex(codex_binary(), home=tmp_path / "home", daemon=client_daemon,
                   model=DIRECT_MODEL).start()  # fmt: skip
    try:
        seen = client.run(project, Script(chat_turns()))
    finally:
        client.stop()
    check_chat_turns(seen, provider_emulator)
    assert not client.api.searches
