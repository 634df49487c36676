"""``chat`` through a real daemon, real SDKs and the provider emulator."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from exai.protocol import ErrorCode
from exai.store.base import ANY_OWNER
from exai.tools.chat import SYSTEM_PROMPT
from tests.conftest import emulated_providers, make_settings, running_daemon


@pytest.fixture
def chat_settings(tmp_path, emulator):
    def build(**overrides):
        return make_settings(tmp_path, **{**emulated_providers(emulator), **overrides})

    return build


def _user_contents(request: dict) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "user"]


async def test_turn_n_sees_turn_n_minus_1(chat_settings, emulator, client_factory):
    async with running_daemon(chat_settings()) as daemon:
        client = await client_factory(daemon)
        first = await client.call("chat", {"prompt": "remember the word PELICAN",
                                           "model": "kimi-k2.6"})  # fmt: skip
        assert first.error is None, first.error
        cid = first.metadata.continuation_id
        assert uuid.UUID(cid) and first.metadata.provider == "kimi"
        second = await client.call(
            "chat", {"prompt": "what was the word?", "continuation_id": cid, "model": "glm-4.6"}
        )
        assert second.error is None, second.error
        assert second.metadata.continuation_id == cid and second.metadata.provider == "glm"
    last = emulator.requests[-1]
    assert last["vendor"] == "glm"
    messages = last["body"]["messages"]
    assert messages[0]["role"] == "system"
    roles = [m["role"] for m in messages[1:]]
    assert roles == ["user", "assistant", "user"]
    assert messages[1]["content"] == "remember the word PELICAN"
    assert messages[2]["content"] == first.outputs[0].text
    assert messages[3]["content"] == "what was the word?"


async def test_history_survives_a_daemon_restart(chat_settings, emulator, client_factory):
    settings = chat_settings()
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        first = await client.call("chat", {"prompt": "turn one"})
        cid = first.metadata.continuation_id
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": "turn two", "continuation_id": cid})
        assert res.error is None
    assert _user_contents(emulator.requests[-1]) == ["turn one", "turn two"]


async def test_two_daemons_sharing_postgres(tmp_path, emulator, postgres_server, client_factory):
    url = postgres_server.create_database(f"chat_{uuid.uuid4().hex[:8]}")
    base = {**emulated_providers(emulator), "store_url": url}
    a = make_settings(tmp_path / "a", **base)
    b = make_settings(tmp_path / "b", **base)
    async with running_daemon(a) as daemon_a, running_daemon(b) as daemon_b:
        ca = await client_factory(daemon_a)
        cb = await client_factory(daemon_b)
        first = await ca.call("chat", {"prompt": "said on daemon A"})
        cid = first.metadata.continuation_id
        second = await cb.call("chat", {"prompt": "asked on daemon B", "continuation_id": cid})
        assert second.error is None, second.error
    assert _user_contents(emulator.requests[-1]) == ["said on daemon A", "asked on daemon B"]


async def test_another_principal_cannot_continue(chat_settings, client_factory):
    async with running_daemon(chat_settings(ws_tokens="alice=ta,bob=tb")) as daemon:
        alice = await client_factory(daemon, "ta")
        bob = await client_factory(daemon, "tb")
        cid = (await alice.call("chat", {"prompt": "private"})).metadata.continuation_id
        res = await bob.call("chat", {"prompt": "let me in", "continuation_id": cid})
        assert res.error.code == ErrorCode.CONVERSATION_NOT_FOUND
        # Alice's thread is untouched: her next turn sees exactly one earlier turn.
        again = await alice.call("chat", {"prompt": "still mine", "continuation_id": cid})
        assert "saw 4 messages" in again.outputs[0].text  # system, user, assistant, new user


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"prompt": "x", "continuation_id": "not-a-uuid"}, ErrorCode.VALIDATION_ERROR),
        ({"prompt": "x", "continuation_id": str(uuid.uuid4())}, ErrorCode.CONVERSATION_NOT_FOUND),
        ({"prompt": "x", "model": "gpt-17-ultra"}, ErrorCode.VALIDATION_ERROR),
        ({"prompt": "x", "files": ["relative/path.py"]}, ErrorCode.VALIDATION_ERROR),
        ({"prompt": "x", "files": ["/etc/passwd"]}, ErrorCode.FORBIDDEN),
        ({"prompt": ""}, ErrorCode.VALIDATION_ERROR),
        ({"prompt": "x" * 200_000, "model": "glm-4.5v"}, ErrorCode.CONTEXT_TOO_LONG),
    ],
)
async def test_bad_input_gets_its_own_code_and_stores_nothing(
    chat_settings, emulator, client_factory, arguments, code
):
    async with running_daemon(chat_settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", arguments)
        assert res.error is not None and res.error.code == code, res.error
        assert emulator.requests == []  # no model was called
        assert await daemon.services.store.list_threads() == []


async def test_unconfigured_provider_is_a_clear_provider_error(tmp_path, emulator, client_factory):
    settings = make_settings(tmp_path, kimi_api_key="sk-x", kimi_base_url=emulator.base_url_kimi)
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": "hi", "model": "glm-4.6"})
        assert res.error.code == ErrorCode.PROVIDER_ERROR
        assert "GLM_API_KEY" in res.error.message and res.error.retryable is False


async def test_files_are_numbered_and_read_fresh_each_turn(chat_settings, emulator, tmp_path,
                                                           client_factory):  # fmt: skip
    source = tmp_path / "module.py"
    source.write_text("def answer():\n    return 41\n")
    async with running_daemon(chat_settings()) as daemon:
        client = await client_factory(daemon)
        first = await client.call("chat", {"prompt": "review", "files": [str(source)]})
        assert first.metadata.files_included == [str(source)]
        source.write_text("def answer():\n    return 42\n")
        await client.call("chat", {"prompt": "and now?",
                                   "continuation_id": first.metadata.continuation_id})  # fmt: skip
    sent = "\n".join(m["content"] for m in emulator.requests[-1]["body"]["messages"])
    assert "return 42" in sent and "return 41" not in sent
    assert "   2│     return 42" in sent


async def test_streaming_chunks_concatenate_to_the_answer(chat_settings, client_factory):
    async with running_daemon(chat_settings(stream_min_chunk_chars=1,
                                            stream_max_chunk_chars=16)) as daemon:  # fmt: skip
        client = await client_factory(daemon)
        chunks: list[str] = []
        res = await client.call("chat", {"prompt": "stream please. " * 8}, stream=True,
                                on_chunk=lambda c: chunks.append(c.text))  # fmt: skip
        assert res.error is None
        assert len(chunks) > 1 and "".join(chunks) == res.outputs[0].text


async def test_replayed_request_calls_the_model_once(chat_settings, emulator, client_factory):
    async with running_daemon(chat_settings()) as daemon:
        client = await client_factory(daemon)
        a = await client.call("chat", {"prompt": "once"}, request_id="same-id")
        b = await client.call("chat", {"prompt": "once"}, request_id="same-id")
        assert a.outputs == b.outputs and b.metadata.replayed
    assert len(emulator.requests) == 1


async def test_concurrent_turns_on_one_thread_keep_order(chat_settings, client_factory):
    async with running_daemon(chat_settings()) as daemon:
        client = await client_factory(daemon)
        cid = (await client.call("chat", {"prompt": "start"})).metadata.continuation_id
        results = await asyncio.gather(*(
            client.call("chat", {"prompt": f"parallel {i}", "continuation_id": cid})
            for i in range(8)
        ))  # fmt: skip
        assert all(r.error is None for r in results)
        stored = await daemon.services.store.messages(cid, "anonymous")
        assert [m.seq for m in stored] == sorted(m.seq for m in stored)
        assert len(stored) == 2 * 9
        assert sum(1 for m in stored if m.role == "user") == 9


def test_chat_schema_is_terse():
    from exai.tools.chat import ChatTool

    schema = ChatTool.input_schema()
    assert schema["required"] == ["prompt"]
    assert Path  # keep the import used


async def test_a_thread_keeps_the_system_prompt_it_started_with(chat_settings, emulator,
                                                                client_factory):  # fmt: skip
    async with running_daemon(chat_settings()) as daemon:
        client = await client_factory(daemon)
        first = await client.call("chat", {"prompt": "hi", "system_prompt": "Answer as a pirate."})
        cid = first.metadata.continuation_id
        await client.call("chat", {"prompt": "again", "continuation_id": cid})
        changed = await client.call("chat", {"prompt": "x", "continuation_id": cid,
                                             "system_prompt": "Answer as a poet."})  # fmt: skip
        assert changed.error.code == ErrorCode.VALIDATION_ERROR
        other = await client.call("chat", {"prompt": "a thread of chat's own"})
        assert other.error is None
    first_sent, second_sent, other_sent = (r["body"]["messages"] for r in emulator.requests)
    assert first_sent[0] == {"role": "system", "content": "Answer as a pirate."}
    assert second_sent[0] == {"role": "system", "content": "Answer as a pirate."}
    assert [m["content"] for m in second_sent[1:]] == ["hi", first.outputs[0].text, "again"]
    assert other_sent[0]["content"] == SYSTEM_PROMPT


def test_the_system_prompt_argument_is_not_offered_to_models():
    from exai.tools.chat import ChatTool

    assert "system_prompt" not in ChatTool.input_schema()["properties"]


async def test_continue_gets_an_answer_and_an_empty_one_is_never_a_stored_turn(
    chat_settings, emulator, client_factory
):
    async with running_daemon(chat_settings()) as daemon:
        client = await client_factory(daemon)
        first = await client.call("chat", {"prompt": "hello", "model": "glm-5.1"})
        cid = first.metadata.continuation_id
        # A person typing "Continue" after a whole answer gets an answer, not nothing.
        more = await client.call("chat", {"prompt": "Continue", "continuation_id": cid,
                                          "model": "glm-5.1"})  # fmt: skip
        assert more.error is None and more.outputs[0].text.strip()
        emulator.script({"text": ""})  # the model answers nothing at all
        empty = await client.call("chat", {"prompt": "and then?", "continuation_id": cid,
                                           "model": "glm-5.1"})  # fmt: skip
        assert empty.error is not None and empty.error.code == ErrorCode.PROVIDER_ERROR
        assert "empty answer" in empty.error.message and empty.error.retryable
        emulator.script({"finish_reason": "sensitive"}, vendor="glm")
        filtered = await client.call("chat", {"prompt": "and now?", "continuation_id": cid,
                                              "model": "glm-5.1"})  # fmt: skip
        assert filtered.error is not None and "content filter" in filtered.error.message
        thread = await daemon.services.store.load_context(cid, ANY_OWNER)
    answers = [m["content"] for m in thread.messages if m["role"] == "assistant"]
    assert answers == [first.outputs[0].text, more.outputs[0].text]  # nothing else stored
