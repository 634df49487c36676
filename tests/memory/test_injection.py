"""Memory through a real daemon: tools, injection into a new thread, and its replay.

Real ``openai`` and ``zai-sdk`` clients against the provider emulator (a test
fixture), which also serves both embeddings endpoints.
"""

from __future__ import annotations

import json

import pytest

from exai.memory.block import BLOCK_START
from exai.protocol import ErrorCode
from tests.conftest import emulated_providers, make_settings, running_daemon


@pytest.fixture
def emulator(provider_emulator):
    provider_emulator.reset()
    return provider_emulator


def _system(request: dict) -> str:
    messages = request["body"]["messages"]
    assert messages[0]["role"] == "system"
    return str(messages[0]["content"])


def _chats(emulator) -> list[dict]:
    return [r for r in emulator.requests if r["path"].endswith("/chat/completions")]


async def test_remembered_memory_reaches_a_new_thread_and_stays_frozen(
    tmp_path, emulator, client_factory
):
    settings = make_settings(
        tmp_path, **emulated_providers(emulator), ws_tokens="alice=ta,bob=tb",
        memory_embedding_providers="glm,openai_compat",
        memory_openai_embedding_base_url=emulator.base_url_kimi,
        memory_embedding_dimensions=128,
    )  # fmt: skip
    async with running_daemon(settings) as daemon:
        alice = await client_factory(daemon, "ta")
        bob = await client_factory(daemon, "tb")
        status = (await alice.call("status", {})).metadata.model_extra["status"]["memory"]
        assert status["vectors"] == "on" and status["vector_search"] == "sqlite-vec"

        saved = await alice.call("remember", {"content": "This repo targets Python 3.11",
                                              "type": "rule", "tags": ["python"]})  # fmt: skip
        assert saved.error is None, saved.error
        memory_id = json.loads(saved.outputs[0].text)["id"]
        again = await alice.call("remember", {"content": "this repo targets python 3.11 "})
        assert json.loads(again.outputs[0].text) == {"id": memory_id, "action": "duplicate",
                                                    "type": "rule"}  # fmt: skip
        embeds = [r for r in emulator.requests if r["path"].endswith("/embeddings")]
        assert embeds and embeds[0]["path"] == "/api/paas/v4/embeddings"  # GLM first

        first = await alice.call("chat", {"prompt": "Which Python version should I use here?"})
        assert first.error is None, first.error
        assert first.metadata.model_extra["memory_ids"] == [memory_id]
        cid = first.metadata.continuation_id
        block = _system(_chats(emulator)[-1])
        assert BLOCK_START in block and "- [rule] This repo targets Python 3.11" in block

        # A memory written later never changes this thread's block.
        await alice.call("remember", {"content": "Python 3.12 is allowed in tests", "type": "rule"})
        for turn in range(2, 11):
            res = await alice.call("chat", {"prompt": f"turn {turn}", "continuation_id": cid})
            assert res.error is None, res.error
            assert res.metadata.model_extra["memory_ids"] == [memory_id]
        tenth = _chats(emulator)[-1]
        assert len([m for m in tenth["body"]["messages"] if m["role"] == "user"]) == 10
        assert _system(tenth).encode() == block.encode()  # byte-identical on turn ten

        # Bob never meets Alice's memories.
        theirs = await bob.call("chat", {"prompt": "Which Python version should I use here?"})
        assert BLOCK_START not in _system(_chats(emulator)[-1])
        assert "memory_ids" not in theirs.metadata.model_extra
        found = await bob.call("recall", {"query": "python version repo"})
        assert json.loads(found.outputs[0].text) == {"memories": []}
        stolen = await bob.call("forget", {"id": memory_id})
        assert stolen.error.code == ErrorCode.VALIDATION_ERROR
        assert stolen.error.details == {"reason": "memory_not_found", "id": memory_id}

        # The per-call switch.
        plain = await alice.call("chat", {"prompt": "Python version?", "use_memory": False})
        assert plain.error is None and BLOCK_START not in _system(_chats(emulator)[-1])

        mine = await alice.call("recall", {"query": "which python version", "types": ["rule"]})
        assert memory_id in [m["id"] for m in json.loads(mine.outputs[0].text)["memories"]]
        gone = await alice.call("forget", {"id": memory_id})
        assert gone.error is None
        after = await alice.call("recall", {"query": "repo targets python 3.11"})
        assert memory_id not in [m["id"] for m in json.loads(after.outputs[0].text)["memories"]]


async def test_keyword_only_without_embeddings_and_setting_off(tmp_path, emulator, client_factory):
    settings = make_settings(tmp_path, **emulated_providers(emulator), memory_inject=False)
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        status = (await client.call("status", {})).metadata.model_extra["status"]["memory"]
        assert status["vectors"] == "off"
        await client.call("remember", {"content": "We chose SQLite for the store",
                                       "type": "decision"})  # fmt: skip
        found = await client.call("recall", {"query": "which store did we choose?"})
        assert [m["content"] for m in json.loads(found.outputs[0].text)["memories"]] == [
            "We chose SQLite for the store"
        ]
        res = await client.call("chat", {"prompt": "which store did we choose?"})
        assert res.error is None and "memory_ids" not in res.metadata.model_extra
        assert BLOCK_START not in _system(_chats(emulator)[-1])


async def test_with_memory_off_its_tools_say_so_by_name(tmp_path, client_factory):
    async with running_daemon(make_settings(tmp_path, memory_enabled=False)) as daemon:
        client = await client_factory(daemon)
        results = [await client.call(tool, arguments) for tool, arguments in (
            ("remember", {"content": "the user likes tea"}), ("recall", {"query": "tea"}),
            ("forget", {"id": "m-1"}))]  # fmt: skip
    for res in results:
        assert res.error is not None and res.error.code == ErrorCode.TOOL_NOT_FOUND
        assert "EXAI_MEMORY_ENABLED=false" in res.error.message
