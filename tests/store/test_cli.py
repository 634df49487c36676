"""``exai conversations``: export/import round trips and foreign transcripts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from exai.cli.main import main
from exai.settings import load_settings
from exai.store import ANY_OWNER, open_store

CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


@pytest.fixture
def use_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)

    def point_at(name: str) -> str:
        url = f"sqlite:///{tmp_path / name}"
        monkeypatch.setenv("EXAI_STORE_URL", url)
        return url

    point_at("first.sqlite3")
    return point_at


async def _seed() -> tuple[str, str]:
    store = await open_store(load_settings())
    try:
        thread = await store.create_thread("alice", title="review")
        await store.append(thread.id, "alice", [
            {"role": "user", "content": "look at this"},
            {"role": "assistant", "content": None, "tool_calls": [CALL],
             "reasoning_content": "thinking"},
            {"role": "tool", "tool_call_id": "c1", "content": "result"},
            {"role": "assistant", "content": "done 中文 😀"},
        ], request_id="r1", model="kimi-k2", provider="kimi", usage={"prompt_tokens": 5},
            files=["/src/a.py"])  # fmt: skip
        await store.append(thread.id, "alice", [{"role": "user", "content": "again"},
                                                {"role": "assistant", "content": "ok"}],
                           request_id="r2")  # fmt: skip
        fork = await store.fork(thread.id, "alice", at_seq=4)
        await store.append(fork.id, "alice", [{"role": "user", "content": "branch"}],
                           request_id="r3")  # fmt: skip
        return thread.id, fork.id
    finally:
        await store.aclose()


async def _threads() -> dict[str, list]:
    store = await open_store(load_settings())
    try:
        threads = await store.list_threads(ANY_OWNER)
        return {t.id: [t, await store.messages(t.id, ANY_OWNER)] for t in threads}
    finally:
        await store.aclose()


def test_export_then_import_restores_every_thread_exactly(
    use_store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
) -> None:
    root_id, _ = asyncio.run(_seed())
    before = asyncio.run(_threads())
    export = tmp_path / "export.jsonl"
    assert main(["conversations", "export", "-o", str(export)]) == 0
    lines = [json.loads(line) for line in export.read_text().splitlines()]
    assert [x["type"] for x in lines].count("thread") == 2
    assert lines[0]["id"] == root_id  # parents first

    use_store("second.sqlite3")
    assert main(["conversations", "import", str(export)]) == 0
    assert asyncio.run(_threads()) == before
    capsys.readouterr()
    # Imported again into the store it came from: every thread is there, and skipped.
    assert main(["conversations", "import", str(export)]) == 0
    io = capsys.readouterr()
    assert io.out.count("skipped ") == 2 and "imported 0, skipped 2" in io.err
    assert asyncio.run(_threads()) == before


def test_rm_deletes_a_thread_and_prune_erases_it(use_store, capsys) -> None:  # type: ignore[no-untyped-def]
    root_id, fork_id = asyncio.run(_seed())
    capsys.readouterr()
    assert main(["conversations", "rm", fork_id]) == 0
    assert f"deleted {fork_id}" in capsys.readouterr().out
    assert list(asyncio.run(_threads())) == [root_id]
    assert main(["conversations", "list", "--deleted"]) == 0
    assert fork_id in capsys.readouterr().out
    assert main(["conversations", "prune"]) == 0 and "pruned 1" in capsys.readouterr().out
    assert main(["conversations", "rm", fork_id]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_list_show_fork_and_prune(use_store, capsys) -> None:  # type: ignore[no-untyped-def]
    root_id, _ = asyncio.run(_seed())
    capsys.readouterr()
    assert main(["conversations", "list"]) == 0
    listing = capsys.readouterr().out
    assert root_id in listing and "alice" in listing
    assert main(["conversations", "show", root_id]) == 0
    shown = capsys.readouterr().out
    assert "look at this" in shown and "tool call" in shown and "(kimi-k2)" in shown
    assert main(["conversations", "fork", root_id, "--at", "2"]) == 1
    assert "tool call" in capsys.readouterr().err
    assert main(["conversations", "fork", root_id, "--at", "4"]) == 0
    fork_id = capsys.readouterr().out.strip()
    assert main(["conversations", "show", fork_id]) == 0
    assert f"fork of  {root_id} at seq 4" in capsys.readouterr().out
    assert main(["conversations", "prune"]) == 0
    assert "pruned 0" in capsys.readouterr().out
    assert main(["conversations", "show", "not-a-thread"]) == 1
    assert "not a conversation id" in capsys.readouterr().err


def _import_lines(tmp_path: Path, rows: list[object], *extra: str) -> int:
    path = tmp_path / "transcript.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return main(["conversations", "import", str(path), *extra])


def test_import_a_plain_role_content_timestamp_transcript(
    use_store,
    tmp_path: Path,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    rows = [
        {"role": "system", "content": "be kind", "timestamp": "2025-01-02T03:04:05Z"},
        {"role": "user", "content": "hello", "timestamp": 1735787046},
        {"role": "assistant", "content": "hi", "timestamp": 1735787047000},
        {"role": "user", "content": "bye"},
        {"role": "assistant", "content": "see you"},
    ]
    assert _import_lines(tmp_path, rows, "--owner", "carol") == 0
    assert "5 messages, owner carol" in capsys.readouterr().out
    [(thread, messages)] = asyncio.run(_threads()).values()
    assert (thread.owner, thread.title, thread.turns) == ("carol", "hello", 2)
    assert [m.content for m in messages] == ["be kind", "hello", "hi", "bye", "see you"]
    assert [m.turn for m in messages] == [1, 1, 1, 2, 2]
    assert messages[0].created_at == 1735787045.0 and messages[2].created_at == 1735787047.0


def test_import_a_linked_transcript_in_any_order(
    use_store,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    rows = [
        {"id": "m3", "parent_id": "m2", "role": "user", "content": "third"},
        {"role": "assistant", "content": "fourth, id assigned, follows the line above"},
        {"id": "m1", "parent_id": None, "role": "user", "content": "first"},
        {"id": "m2", "parent_id": "m1", "role": "assistant", "content": "second"},
    ]
    assert _import_lines(tmp_path, rows) == 0
    [(thread, messages)] = asyncio.run(_threads()).values()
    assert [m.content for m in messages][:3] == ["first", "second", "third"]
    assert messages[3].content.startswith("fourth") and thread.owner == "anonymous"


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ([{"id": "a", "parent_id": None, "role": "user", "content": "x"},
          {"id": "b", "parent_id": "zzz", "role": "assistant", "content": "y"}],
         "line 2: parent_id 'zzz' matches no message id"),
        ([{"id": "a", "parent_id": None, "role": "user", "content": "x"},
          {"id": "b", "parent_id": "c", "role": "user", "content": "y"},
          {"id": "c", "parent_id": "b", "role": "assistant", "content": "z"}],
         "cycle"),
        ([{"id": "a", "parent_id": "b", "role": "user", "content": "x"},
          {"id": "b", "parent_id": "a", "role": "assistant", "content": "y"}],
         "cycle"),
        ([{"role": "user", "content": "x"}, {"role": "human", "content": "y"}],
         "line 2: role 'human' is not one of"),
        ([{"id": "a", "parent_id": None, "role": "user", "content": "x"},
          {"id": "b", "parent_id": "a", "role": "assistant", "content": "y"},
          {"id": "c", "parent_id": "a", "role": "assistant", "content": "z"}],
         "several replies"),
        ([{"id": "a", "parent_id": None, "role": "user", "content": "x"},
          {"id": "b", "parent_id": None, "role": "user", "content": "y"}],
         "several messages have no parent"),
        ([{"id": "a", "role": "user", "content": "x"}, {"id": "a", "role": "user", "content": "y"}],
         "line 2: id 'a' is already used on line 1"),
        ([{"role": "user", "content": "x"}, "{not json"], "line 2: not JSON"),
        ([{"role": "user", "content": "x"}, {"role": "tool", "content": "r"}],
         "needs the tool_call_id"),
        ([{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "q", "content": "r"}],
         "answers no earlier tool call"),
        ([{"role": "user", "content": "x", "timestamp": "yesterday"}], "timestamp"),
    ],
)  # fmt: skip
def test_import_refuses_broken_transcripts(
    use_store,
    tmp_path: Path,
    capsys,
    rows: list[object],
    problem: str,  # type: ignore[no-untyped-def]
) -> None:
    assert _import_lines(tmp_path, rows) == 1
    assert problem in capsys.readouterr().err
    assert asyncio.run(_threads()) == {}
