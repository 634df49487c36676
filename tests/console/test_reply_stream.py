"""The console's streamed reply keeps its connection alive while the model is quiet,
as the model faces' streams do (one loop, exai.web.event_stream.relay)."""

from __future__ import annotations

from exai.client import ExaiClient
from tests.console.conftest import ALICE
from tests.console.test_http import console, sign_in


async def test_a_quiet_model_gets_keep_alive_comments_before_the_reply(tmp_path, emulator):
    async with console(tmp_path, emulator, faces_ping_s=0.2) as http:
        daemon = http.daemon  # type: ignore[attr-defined]
        async with ExaiClient(daemon.url, ALICE) as alice:
            first = await alice.call("chat", {"prompt": "a thread to continue"})
        csrf = await sign_in(http, ALICE)
        emulator.configure(latency_ms=700)  # quiet for longer than the keep-alive interval
        url = f"/console/threads/{first.metadata.continuation_id}/continue"
        reply = await http.post(
            url,
            data={"csrf": csrf, "prompt": "take your time"},
            headers={"accept": "text/event-stream"},
            timeout=30,
        )
    assert reply.status_code == 200
    blocks = [block for block in reply.text.split("\n\n") if block]
    # An SSE comment, which the page's script (and any SSE parser) skips.
    assert blocks[0] == ": ping"
    first_event = next(i for i, block in enumerate(blocks) if block.startswith("event: "))
    assert first_event > 0 and set(blocks[:first_event]) == {": ping"}
    assert blocks[first_event].startswith("event: chunk\n")
    assert blocks[-1].startswith("event: done\n")
