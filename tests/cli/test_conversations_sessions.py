"""``exai conversations`` on agent sessions: listed and exported by face and client, shown
as a transcript with tool calls tied to their results, and never a terminal escape."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exai.cli.main import main
from exai.settings import load_settings
from exai.store import ANY_OWNER, open_store
from exai.store.costs import CostRow
from exai.store.sessions import SessionTurn

SYSTEM = "You are Claude Code.\n" * 200


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip


READ = _call("toolu_1", "Read", {"file_path": "/src/a.py", "limit": 40})
WRITE = _call("toolu_2", "Write", {"file_path": "/src/a.py", "content": "x = 1\ny = 2"})
HOSTILE = "\x1b]0;pwned\x07\x1b[2J"


@dataclass
class Seeded:
    claude: str
    rewritten: str
    codex: str
    chat: str
    fork: str


PointAt = Callable[[str], None]
Capture = pytest.CaptureFixture[str]


@pytest.fixture
def use_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> PointAt:
    monkeypatch.chdir(tmp_path)

    def point_at(name: str) -> None:
        monkeypatch.setenv("EXAI_STORE_URL", f"sqlite:///{tmp_path / name}")

    point_at("first.sqlite3")
    return point_at


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _cost(request_id: str, nanos: int) -> CostRow:
    return CostRow(at=1.0, instance_id="i", principal="alice", tool="completion",
                   session_id="S", request_id=request_id, thread_id=None, model="kimi-k2",
                   provider="kimi", prompt_tokens=1200, cached_prompt_tokens=1000,
                   completion_tokens=30, reasoning_tokens=12, currency="USD",
                   cost_input=nanos, cost_cached_input=0, cost_output=0,
                   cost_total=nanos)  # fmt: skip


async def _seed() -> Seeded:
    """A chat thread; a Claude Code session of two turns (a tool round whose result
    carries terminal escapes), the thread that follows it after a rewrite, a Codex
    session, and a person's fork of the Claude session (newest)."""
    store = await open_store(load_settings())
    usage = {"prompt_tokens": 1200, "cached_prompt_tokens": 1000, "completion_tokens": 30,
             "reasoning_tokens": 12}  # fmt: skip

    async def keep(messages: list[dict[str, Any]], answer: dict[str, Any], request_id: str,
                   **kw: Any) -> str:  # fmt: skip
        kept = await store.keep_session_turn(SessionTurn(
            owner="alice", messages=messages, answer=answer, request_id=request_id,
            session_id="S", model="kimi-k2", provider="kimi", usage=usage, **kw))  # fmt: skip
        return kept.thread_id

    try:
        chat = await store.create_thread("bob", title="a chat thread")
        await store.append(chat.id, "bob", [_user("hi"), {"role": "assistant", "content": "hello"}],
                           request_id="c1")  # fmt: skip
        claude_kw = {"face": "anthropic", "client": "Claude Code 2.1.3", "ref": "sess-1"}
        first = [{"role": "system", "content": SYSTEM}, _user("fix the bug in a.py")]
        call = {"role": "assistant", "content": "Reading it.", "tool_calls": [READ],
                "reasoning_content": "the file first"}  # fmt: skip
        claude = await keep(first, call, "r1", **claude_kw)
        result = {"role": "tool", "tool_call_id": "toolu_1", "content": f"x = 0{HOSTILE}\nok"}
        await keep([*first, call, result], {"role": "assistant", "content": None,
                                            "tool_calls": [WRITE]}, "r2", **claude_kw)  # fmt: skip
        await store.record_costs([_cost("r1", 1_234_000), _cost("r2", 100_000_000)])
        rewritten = await keep([_user("summary: a.py fixed")], {"role": "assistant",
                               "content": "done"}, "r3", **claude_kw)  # fmt: skip
        codex = await keep([_user("list files")], {"role": "assistant", "content": "a.py"},
                           "r4", face="responses", client="Codex 0.9")  # fmt: skip
        fork = await store.fork(claude, "alice", at_seq=2)
        return Seeded(claude, rewritten, codex, chat.id, fork.id)
    finally:
        await store.aclose()


async def _threads() -> dict[str, list[Any]]:
    store = await open_store(load_settings())
    try:
        threads = await store.list_threads(ANY_OWNER)
        return {t.id: [t, await store.messages(t.id, ANY_OWNER)] for t in threads}
    finally:
        await store.aclose()


def _run(capsys: Capture, *args: str) -> tuple[int, str, str]:
    code = main(["conversations", *args])
    io = capsys.readouterr()
    return code, io.out, io.err


def _ids(out: str) -> set[str]:
    return {line.split()[0] for line in out.splitlines()[1:]}


def test_list_picks_sessions_by_face_path_and_client_and_shows_both(
    use_store: PointAt, capsys: Capture
) -> None:
    s = asyncio.run(_seed())
    code, out, _ = _run(capsys, "list")
    assert code == 0 and _ids(out) == {s.claude, s.rewritten, s.codex, s.chat, s.fork}
    assert out.splitlines()[0].split() == ["ID", "OWNER", "TURNS", "UPDATED", "FACE", "CLIENT",
                                           "TITLE"]  # fmt: skip
    row = next(line for line in out.splitlines() if line.startswith(s.codex))
    assert "responses" in row and "Codex 0.9" in row
    chat_row = next(line for line in out.splitlines() if line.startswith(s.chat))
    assert chat_row.split()[5:7] == ["-", "-"]  # no face, no client

    assert _ids(_run(capsys, "list", "--sessions")[1]) == {s.claude, s.rewritten, s.codex}
    assert _ids(_run(capsys, "list", "--threads")[1]) == {s.chat, s.fork}
    for face in ("anthropic", "/v1/messages", "messages", "ANTHROPIC"):
        assert _ids(_run(capsys, "list", "--face", face)[1]) == {s.claude, s.rewritten}
    assert _ids(_run(capsys, "list", "--face", "/v1/responses")[1]) == {s.codex}
    assert _ids(_run(capsys, "list", "--face", "/v1/chat/completions")[1]) == set()
    assert _ids(_run(capsys, "list", "--client", "claude code")[1]) == {s.claude, s.rewritten}
    assert _ids(_run(capsys, "list", "--client", "CODEX", "--owner", "alice")[1]) == {s.codex}
    # the limit counts the threads shown, not those read (the oldest, the chat, is read last)
    assert _ids(_run(capsys, "list", "--threads", "--limit", "2")[1]) == {s.chat, s.fork}
    assert _ids(_run(capsys, "list", "--threads", "--limit", "1")[1]) == {s.fork}

    code, out, _ = _run(capsys, "list", "--sessions", "--json")
    rows = {row["id"]: row for row in map(json.loads, out.splitlines())}
    assert (rows[s.rewritten]["face"], rows[s.rewritten]["client"],
            rows[s.rewritten]["session_ref"], rows[s.rewritten]["follows"]) == (
        "anthropic", "Claude Code 2.1.3", "sess-1", s.claude)  # fmt: skip


def test_list_refuses_an_unknown_face_and_contradictory_filters(
    use_store: PointAt, capsys: Capture
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["conversations", "list", "--face", "gemini"])
    assert exc.value.code == 2
    assert "anthropic (/v1/messages)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["conversations", "list", "--sessions", "--threads"])
    capsys.readouterr()
    code, _, err = _run(capsys, "list", "--threads", "--client", "claude")
    assert code == 2 and "--threads leaves them out" in err


def test_show_prints_a_session_as_a_transcript_with_calls_tied_to_results(
    use_store: PointAt, capsys: Capture
) -> None:
    s = asyncio.run(_seed())
    code, out, _ = _run(capsys, "show", s.claude)
    assert code == 0
    for line in ("face     anthropic (/v1/messages)", "client   Claude Code 2.1.3",
                 "session  sess-1 (the client's own id)", "turns    2",
                 "cost     0.101234 USD (2 turn(s) priced)"):  # fmt: skip
        assert line in out.splitlines()
    # the system prompt and the reasoning are sized, not shown
    assert "You are Claude Code" not in out and f"system: {len(SYSTEM)} characters" in out
    assert "the file first" not in out and "[reasoning: 14 characters" in out
    assert "=== turn 1 · " in out and "kimi-k2 (kimi) · 1200 in (1000 cached), 30 out " \
        "(12 reasoning) tokens · 0.001234 USD" in out  # fmt: skip
    call = "    -> tool call toolu_1: Read\n        file_path: /src/a.py\n        limit: 40\n"
    assert call in out
    assert "[4] tool result for toolu_1 (Read)\n    x = 0" in out
    # a multi-line argument is a block under its name
    assert "        content: |\n          x = 1\n          y = 2\n" in out

    out = _run(capsys, "show", s.claude, "--reasoning", "--system")[1]
    assert "    [reasoning]\n    | the file first" in out and "You are Claude Code." in out

    shown = _run(capsys, "show", s.rewritten)[1]
    assert f"follows  {s.claude} (the client rewrote its history)" in shown
    shown = _run(capsys, "show", s.fork)[1]
    assert f"fork of  {s.claude} at seq 2 (depth 1)" in shown and "face " not in shown


def test_terminal_escapes_in_stored_text_are_neutralized(
    use_store: PointAt, capsys: Capture
) -> None:
    s = asyncio.run(_seed())
    out = _run(capsys, "show", s.claude, "--reasoning", "--system")[1]
    assert "\x1b" not in out and "\x07" not in out
    assert "x = 0\\x1b]0;pwned\\x07\\x1b[2J\n    ok" in out
    # everything else printed from the store goes through the same escaping
    store_client = "evil\x1b[2J\u202eclient\r"

    async def hostile() -> str:
        store = await open_store(load_settings())
        try:
            kept = await store.keep_session_turn(SessionTurn(
                owner="mallory\x1b[31m", messages=[_user(f"title{HOSTILE}")],
                answer={"role": "assistant", "content": "ok", "tool_calls": [{
                    "id": "c\x1b[1m", "type": "function", "function": {
                        "name": "Bash\x9b2J", "arguments": json.dumps({"cmd": HOSTILE})}}]},
                request_id="h1", session_id="S", face="openai", client=store_client,
                ref=f"ref{HOSTILE}", model=f"m{HOSTILE}"))  # fmt: skip
            return kept.thread_id
        finally:
            await store.aclose()

    thread_id = asyncio.run(hostile())
    for args in (("list",), ("show", thread_id), ("list", "--client", "evil")):
        code, out, _ = _run(capsys, *args)
        assert code == 0 and thread_id in out
        assert not any(c in out for c in "\x1b\x07\x9b\u202e\r"), args
    assert "client   evil\\x1b[2J\\u202eclient\n" in _run(capsys, "show", thread_id)[1]


def test_export_picks_sessions_with_the_parents_their_forks_need_and_imports_intact(
    use_store: PointAt, tmp_path: Path, capsys: Capture
) -> None:
    s = asyncio.run(_seed())
    before = asyncio.run(_threads())

    def exported(*args: str) -> tuple[list[dict[str, Any]], str]:
        path = tmp_path / "export.jsonl"
        code, _, err = _run(capsys, "export", "-o", str(path), *args)
        assert code == 0
        return [json.loads(line) for line in path.read_text().splitlines()], err

    lines, _ = exported("--client", "codex")
    assert [x["id"] for x in lines if x["type"] == "thread"] == [s.codex]
    lines, err = exported("--threads")  # the fork's parent is a session: it goes too
    assert {x["id"] for x in lines if x["type"] == "thread"} == {s.chat, s.fork, s.claude}
    assert "with 1 parent thread(s) the forks need" in err

    lines, err = exported("--sessions")
    heads = [x for x in lines if x["type"] == "thread"]
    assert {x["id"] for x in heads} == {s.claude, s.rewritten, s.codex}
    assert "exported 3 conversation(s)" in err
    messages = [x for x in lines if x["type"] == "message" and x["thread_id"] == s.claude]
    assert messages[2]["tool_calls"] == [READ] and messages[2]["reasoning"] == "the file first"
    assert messages[3]["tool_call_id"] == "toolu_1"

    use_store("second.sqlite3")
    assert _run(capsys, "import", str(tmp_path / "export.jsonl"))[0] == 0
    after = asyncio.run(_threads())
    assert after == {tid: before[tid] for tid in (s.claude, s.rewritten, s.codex)}
    thread = after[s.rewritten][0]
    assert (thread.face, thread.client, thread.session_ref, thread.follows) == (
        "anthropic", "Claude Code 2.1.3", "sess-1", s.claude)  # fmt: skip


def test_export_takes_ids_or_filters_not_both(use_store: PointAt, capsys: Capture) -> None:
    s = asyncio.run(_seed())
    code, _, err = _run(capsys, "export", s.claude, "--sessions")
    assert code == 2 and "give IDs or filters" in err
