"""``chat`` turns through a real daemon keep a byte-stable prefix on the wire."""

from __future__ import annotations

from itertools import pairwise

from exai.store.prefix import shares_prefix
from tests.conftest import emulated_providers, make_settings, running_daemon

_FILES_HEADER = "Files referenced in this conversation"


def _own_tail(messages: list[dict]) -> int:
    """How many trailing messages are the call's own: its new input, and its files."""
    files = len(messages) >= 2 and str(messages[-2].get("content", "")).startswith(_FILES_HEADER)
    return 2 if files else 1


async def test_each_turn_on_the_wire_opens_with_the_previous_one(
    tmp_path, emulator, client_factory
):
    source = tmp_path / "module.py"
    source.write_text("def answer():\n    return 41\n")
    settings = make_settings(tmp_path, **emulated_providers(emulator))
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        cid = None
        for n, files in enumerate(([], [str(source)], [], []), 1):
            arguments = {"prompt": f"turn {n}", "model": "kimi-k2.6", "files": files}
            if cid:
                arguments["continuation_id"] = cid
            result = await client.call("chat", arguments)
            assert result.error is None, result.error
            cid = result.metadata.continuation_id
            source.write_text(f"def answer():\n    return {41 + n}\n")  # read fresh next turn
    bodies = [r["body"]["messages"] for r in emulator.requests_for("kimi")]
    assert len(bodies) == 4
    for earlier, later in pairwise(bodies):
        stable = len(earlier) - _own_tail(earlier)
        assert stable >= 1 and shares_prefix(earlier, stable, later)
    # The file, read fresh, is in the tail of every turn after it was referenced.
    assert "return 44" in bodies[-1][-2]["content"]
