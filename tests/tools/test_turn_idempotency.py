"""A stored turn is found again by the request that made it, and only by that request.

The protocol makes a ``request_id`` unique within its session, so the store keys a
turn on (principal, session, request_id) and keeps a fingerprint of the call (tool
and arguments) beside it. A retry in the same session, even after a restart, is
answered from the store without calling the provider; the same id from another
session is a new request; the same id in the same session for a different call is
refused. Run on SQLite and on a real Postgres.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from exai.protocol import ErrorCode
from exai.settings import Settings
from tests.conftest import emulated_providers, make_settings, running_daemon

MODEL = "kimi-k2.6"


@pytest.fixture(params=["sqlite", "postgres"])
def settings(request: pytest.FixtureRequest, tmp_path: Path, emulator: Any) -> Settings:
    overrides: dict[str, Any] = emulated_providers(emulator)
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
        overrides["store_url"] = server.create_database(f"idem_{uuid.uuid4().hex[:8]}")
    return make_settings(tmp_path, **overrides)


def _user_prompts(daemon_store_messages: list[Any]) -> list[str]:
    return [m.content for m in daemon_store_messages if m.role == "user"]


async def test_a_request_id_reused_by_another_session_is_a_new_turn(
    settings, emulator, client_factory
):
    async with running_daemon(settings) as daemon:
        first_session = await client_factory(daemon)
        first = await first_session.call("chat", {"prompt": "turn one", "model": MODEL},
                                         request_id="1")  # fmt: skip
        assert first.error is None, first.error
        cid = first.metadata.continuation_id
        # Another session, as the minimal client in docs/protocol.md does: its first id is "1".
        other_session = await client_factory(daemon)
        second = await other_session.call(
            "chat", {"prompt": "turn two", "model": MODEL, "continuation_id": cid}, request_id="1"
        )
        assert second.error is None, second.error
        assert not second.metadata.replayed
        assert second.outputs[0].text != first.outputs[0].text
        assert "turn two" in second.outputs[0].text
        stored = await daemon.services.store.messages(cid, "anonymous")
    assert _user_prompts(stored) == ["turn one", "turn two"]
    assert len(emulator.requests) == 2


async def test_a_retry_after_a_restart_is_answered_from_the_store_without_the_provider(
    settings, emulator, client_factory
):
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        cid = (await client.call("chat", {"prompt": "start"})).metadata.continuation_id
        arguments = {"prompt": "second", "continuation_id": cid}
        answered = await client.call("chat", arguments, request_id="r-2")
        session = client.session_id
        await client.close()
    calls_before = len(emulator.requests)
    async with running_daemon(settings) as daemon:  # the replay cache is gone; the store is not
        client = await client_factory(daemon, session_id=session)
        again = await client.call("chat", arguments, request_id="r-2")
        assert again.error is None, again.error
        assert again.outputs == answered.outputs and again.metadata.replayed
        assert again.metadata.continuation_id == cid
        stored = await daemon.services.store.messages(cid, "anonymous")
    assert len(emulator.requests) == calls_before
    assert _user_prompts(stored) == ["start", "second"]


async def test_the_same_request_id_for_a_different_call_is_refused_not_answered(
    settings, emulator, client_factory
):
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        cid = (await client.call("chat", {"prompt": "start"})).metadata.continuation_id
        await client.call("chat", {"prompt": "asked", "continuation_id": cid}, request_id="r-2")
        session = client.session_id
        await client.close()
    calls_before = len(emulator.requests)
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon, session_id=session)
        other = await client.call(
            "chat", {"prompt": "a new question", "continuation_id": cid}, request_id="r-2"
        )
        assert other.error is not None and other.error.code == ErrorCode.REQUEST_ID_REUSED
        assert not other.error.retryable and "r-2" in other.error.message
        assert other.outputs == []
        stored = await daemon.services.store.messages(cid, "anonymous")
    assert len(emulator.requests) == calls_before  # refused before any provider call
    assert _user_prompts(stored) == ["start", "asked"]


async def test_a_retried_first_turn_finds_its_thread_again(settings, emulator, client_factory):
    """The daemon stored the first turn, then died before its answer reached the client."""
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        first = await client.call("chat", {"prompt": "hello there"}, request_id="first")
        assert first.error is None, first.error
        session = client.session_id
        await client.close()
    calls_before = len(emulator.requests)
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon, session_id=session)
        retry = await client.call("chat", {"prompt": "hello there"}, request_id="first")
        assert retry.error is None, retry.error
        assert retry.metadata.continuation_id == first.metadata.continuation_id
        assert retry.outputs == first.outputs and retry.metadata.replayed
        threads = await daemon.services.store.list_threads("anonymous")
    assert [t.id for t in threads] == [first.metadata.continuation_id]
    assert threads[0].turns == 1
    assert len(emulator.requests) == calls_before


async def test_a_retry_sent_to_another_daemon_on_the_same_postgres_gets_the_stored_turn(
    tmp_path, emulator, postgres_server, client_factory
):
    url = postgres_server.create_database(f"idem_{uuid.uuid4().hex[:8]}")
    base = {**emulated_providers(emulator), "store_url": url}
    a, b = make_settings(tmp_path / "a", **base), make_settings(tmp_path / "b", **base)
    async with running_daemon(a) as daemon_a, running_daemon(b) as daemon_b:
        on_a = await client_factory(daemon_a)
        first = await on_a.call("chat", {"prompt": "asked on A"}, request_id="r1")
        assert first.error is None, first.error
        calls = len(emulator.requests)
        # The client lost daemon A and resumes its session on daemon B.
        on_b = await client_factory(daemon_b, session_id=on_a.session_id)
        retry = await on_b.call("chat", {"prompt": "asked on A"}, request_id="r1")
        assert retry.error is None and retry.metadata.replayed
        assert retry.outputs == first.outputs
        assert retry.metadata.continuation_id == first.metadata.continuation_id
        assert len(emulator.requests) == calls
        assert len(await daemon_b.services.store.list_threads("anonymous")) == 1
