"""``challenge`` wraps a statement in instructions to re-examine it; no model is asked."""

from __future__ import annotations

import json

from exai.protocol import ErrorCode
from tests.conftest import emulated_providers, make_settings, running_daemon


async def test_the_statement_comes_back_with_instructions_to_question_it(
    tmp_path, emulator, client_factory
):
    statement = "You're wrong, the cache is thread-safe because it uses a dict."
    async with running_daemon(make_settings(tmp_path, **emulated_providers(emulator))) as daemon:
        client = await client_factory(daemon)
        result = await client.call("challenge", {"prompt": statement})
        empty = await client.call("challenge", {"prompt": ""})
    assert result.error is None
    body = json.loads(result.outputs[0].text)
    assert body["original_statement"] == statement
    assert statement in body["challenge_prompt"]
    assert "Do not agree automatically" in body["challenge_prompt"]
    assert empty.error.code == ErrorCode.VALIDATION_ERROR
    assert emulator.requests == []
