"""``completion``: a whole message array to a model, stateless, through a real daemon."""

from __future__ import annotations

import pytest

from exai.auth import issue_token
from exai.protocol import ErrorCode
from tests.conftest import emulated_providers, make_settings, running_daemon

SECRET = "completion-test-secret-0123456789abcdef"

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "first answer", "name": "helper"},
    {"role": "user", "content": [{"type": "text", "text": "second question"}]},
]


@pytest.fixture
def settings(tmp_path, emulator):
    def build(**overrides):
        return make_settings(tmp_path, **{**emulated_providers(emulator), **overrides})

    return build


async def test_the_messages_reach_the_provider_as_given_and_nothing_is_stored(
    settings, emulator, client_factory
):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("completion", {"messages": CONVERSATION, "model": "k2"})
        assert res.error is None, res.error
        assert res.metadata.model == "kimi-k2.6" and res.metadata.provider == "kimi"
        assert res.metadata.finish_reason == "stop"
        assert res.metadata.continuation_id is None
        assert await daemon.services.store.list_threads() == []
    (sent,) = emulator.requests
    assert sent["body"]["messages"] == CONVERSATION
    assert res.outputs[0].text == "emulated reply #2 to: second question (saw 4 messages)"


async def test_auto_chooses_a_model_and_max_tokens_reaches_the_provider(
    settings, emulator, client_factory
):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("completion", {"messages": CONVERSATION[1:2], "max_tokens": 3})
        assert res.error is None, res.error
        assert res.metadata.model and res.metadata.provider in ("kimi", "glm")
    assert emulator.requests[-1]["body"]["max_tokens"] == 3


async def test_it_is_unlisted_but_callable(settings, client_factory):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        assert "completion" not in {t.name for t in await client.list_tools()}
        assert "completion" not in daemon.core.registry.names()
        res = await client.call("completion", {"messages": [{"role": "user", "content": "hi"}]})
        assert res.error is None


async def test_scopes_apply(settings, client_factory):
    async with running_daemon(settings(jwt_secret=SECRET)) as daemon:
        chat_only = await client_factory(daemon, issue_token(SECRET, "carol", ["chat"]))
        res = await chat_only.call("completion", {"messages": [{"role": "user", "content": "x"}]})
        assert res.error.code == ErrorCode.FORBIDDEN


async def test_a_denied_completion_does_not_exist(settings, client_factory):
    async with running_daemon(settings(tools_deny=["completion"])) as daemon:
        client = await client_factory(daemon)
        res = await client.call("completion", {"messages": [{"role": "user", "content": "x"}]})
        assert res.error.code == ErrorCode.TOOL_NOT_FOUND


async def test_a_long_answer_comes_back_whole_and_is_not_stored(settings, emulator,
                                                                client_factory):  # fmt: skip
    long_text = "word " * 6000  # well over a 1,000-token result limit
    emulator.script({"text": long_text})
    async with running_daemon(settings(max_result_tokens=1000)) as daemon:
        client = await client_factory(daemon)
        res = await client.call("completion", {"messages": [{"role": "user", "content": "x"}]})
        assert res.error is None and res.outputs[0].text == long_text
        assert "artifact_id" not in (res.metadata.model_extra or {})
        assert await daemon.services.store.list_threads() == []


@pytest.mark.parametrize(
    "messages",
    [[], [{"role": "narrator", "content": "x"}], [{"content": "no role"}]],
    ids=["empty", "unknown-role", "no-role"],
)
async def test_bad_messages_are_validation_errors(settings, emulator, client_factory, messages):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("completion", {"messages": messages})
        assert res.error.code == ErrorCode.VALIDATION_ERROR
    assert emulator.requests == []
