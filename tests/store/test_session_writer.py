"""The session writer process: the keeper's turns kept by a real child process in a
real SQLite file, as the store itself keeps them; a writer killed mid-session is
started again and nothing is lost or kept twice; a turn the store refuses, or one
that cannot be sent, is refused alone; the writer's environment holds no secret
and it runs at a lower CPU priority; closing stops it."""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from exai.errors import ExaiError
from exai.settings import Settings
from exai.store.base import ANY_OWNER, StoreLimits
from exai.store.session_writer import SessionWriter, TurnNotKept
from exai.store.sessions import SessionTurn
from exai.store.sqlite import SqliteStore
from exai.tools.session_keeper import SessionKeeper

SECRET = "sk-kimi-writer-secret-7f3a"


def _turn(n: int, owner: str = "alice", **kw: Any) -> SessionTurn:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for i in range(n):
        history += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
    asked = [*history, {"role": "user", "content": f"q{n}"}]
    answer = {"role": "assistant", "content": f"a{n}"}
    return SessionTurn(owner=owner, messages=asked, answer=answer, session_id="S",
                       request_id=f"{owner}-r{n}", face="openai", client="bench 1.0",
                       model="kimi-k3", provider="kimi",
                       usage={"prompt_tokens": 10 * n, "completion_tokens": 3},
                       allowed_models=frozenset({"kimi-k3"}), **kw)  # fmt: skip


@pytest.fixture
async def store_and_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KIMI_API_KEY", SECRET)  # in the daemon's environment, not the writer's
    settings = Settings(data_dir=tmp_path, kimi_api_key=SECRET)
    store = await SqliteStore.open(settings.sqlite_path, StoreLimits())
    yield store, settings
    await store.aclose()


async def test_turns_are_kept_by_the_writer_as_the_store_keeps_them(store_and_settings) -> None:
    store, settings = store_and_settings
    writer = SessionWriter(settings)
    try:
        first = await writer.keep_session_turns([_turn(0), _turn(1)])
        again = await writer.keep_session_turns([_turn(1)])  # the same request, sent again
        pid = writer.pid
        pipe = writer._process.stdin.get_extra_info("pipe")  # type: ignore[union-attr]
        # A batch of whole histories fits the pipe: 1 MiB, Linux's default maximum.
        assert fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ) == min(1 << 20, _pipe_max())
    finally:
        await writer.aclose()
    assert [k.kept for k in first] == ["started", "continued"]
    assert first[0].thread_id == first[1].thread_id and first[1].asked == ("q1",)
    assert again[0].kept == "retried" and again[0].thread_id == first[0].thread_id
    (thread,) = await store.list_threads(ANY_OWNER)
    assert thread.turns == 2 and thread.face == "openai" and thread.client == "bench 1.0"
    messages = await store.messages(thread.id, "alice")
    assert [m.content for m in messages][-2:] == ["q1", "a1"]
    assert pid is not None and writer.pid is None  # closing stopped it
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_the_writer_holds_no_secret_and_gives_up_cpu_priority(store_and_settings) -> None:
    _, settings = store_and_settings
    writer = SessionWriter(settings)
    try:
        await writer.keep_session_turns([_turn(0)])
        assert writer.pid is not None
        proc = Path(f"/proc/{writer.pid}")
        environ = await asyncio.to_thread((proc / "environ").read_bytes)
        stats = [await asyncio.to_thread((task / "stat").read_text)
                 for task in (proc / "task").iterdir()]  # fmt: skip
    finally:
        await writer.aclose()
    assert SECRET.encode() not in environ and b"KIMI_API_KEY" not in environ
    assert settings.sessions_writer_nice == 10
    assert len(stats) >= 2  # the writer's own thread and its store's
    for stat in stats:  # every thread of it, the store's included
        fields = stat.rsplit(")", 1)[1].split()
        nice = int(fields[16])  # field 19 of proc(5)
        assert nice == min(19, os.nice(0) + 10)  # its increment over ours, up to the top


async def test_the_writer_can_compete_as_an_equal(store_and_settings) -> None:
    _, settings = store_and_settings
    settings = settings.model_copy(update={"sessions_writer_nice": 0})
    writer = SessionWriter(settings)
    try:
        await writer.keep_session_turns([_turn(0)])
        assert writer.pid is not None
        assert os.getpriority(os.PRIO_PROCESS, writer.pid) == os.nice(0)
    finally:
        await writer.aclose()


async def test_a_writer_killed_mid_session_is_started_again_and_loses_nothing(
    store_and_settings,
) -> None:
    store, settings = store_and_settings
    keeper = SessionKeeper(SessionWriter(settings), closes_store=True, quiet_s=0)
    keeper.start()
    writer: Any = keeper._store
    try:
        for n in range(3):
            keeper.keep(_turn(n))
        await keeper.settled()
        killed = writer.pid
        os.kill(killed, signal.SIGKILL)
        for n in range(3, 6):  # the next batch finds the writer gone and is tried again
            keeper.keep(_turn(n))
        await asyncio.wait_for(keeper.settled(), 30)
        assert writer.pid not in (None, killed)
    finally:
        await keeper.aclose()
    assert keeper.stats() == {"kept": 6, "failed": 0, "dropped": 0, "queued": 0}
    (thread,) = await store.list_threads(ANY_OWNER)
    assert thread.turns == 6  # every turn once, in order, in one thread


async def test_a_turn_refused_is_refused_alone(store_and_settings) -> None:
    store, settings = store_and_settings
    malformed = SessionTurn(owner="alice", messages=[{"role": "narrator", "content": "x"}],
                            answer={"role": "assistant", "content": "y"}, session_id="S",
                            request_id="malformed", face="openai")  # fmt: skip
    odd = {"role": "assistant", "content": object()}  # no value a message can hold
    unsendable = dataclasses.replace(_turn(0, owner="bob"), answer=odd)
    writer = SessionWriter(settings)
    try:
        results = await writer.keep_session_turns([_turn(0), malformed, unsendable, _turn(1)])
    finally:
        await writer.aclose()
    assert [type(r).__name__ for r in results] == ["SessionKept", "TurnNotKept", "TurnNotKept",
                                                   "SessionKept"]  # fmt: skip
    assert isinstance(results[1], ExaiError) and "narrator" in str(results[1])
    assert isinstance(results[2], TurnNotKept) and "cannot be stored" in str(results[2])
    (thread,) = await store.list_threads(ANY_OWNER)
    assert thread.owner == "alice" and thread.turns == 2


def _pipe_max() -> int:
    return int(Path("/proc/sys/fs/pipe-max-size").read_text())
