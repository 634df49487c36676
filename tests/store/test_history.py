"""History assembly: what a provider call is sent, built from the store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from exai.errors import ContextTooLongError, ConversationNotFoundError, ExaiError
from exai.store.base import ConversationStore
from exai.store.history import ContextLimits, assemble_messages
from exai.store.tokens import estimator_for

BIG = ContextLimits(context_window=128_000, max_output_tokens=8_000, family="kimi")


@dataclass
class Bundle:
    blocks: list[str] = field(default_factory=list)
    included: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class DiskReader:
    """Follows the ``exai.files.read_files`` contract: reads now, within a budget."""

    calls: list[tuple[list[str], int]] = field(default_factory=list)

    def __call__(self, paths: list[str], roots: list[str], budget: int,
                 estimate: Callable[[str], int]) -> Bundle:  # fmt: skip
        self.calls.append((list(paths), budget))
        bundle = Bundle()
        for path in paths:
            if not any(path.startswith(root) for root in roots):
                bundle.skipped.append((path, "outside the allowed roots"))
                continue
            block = f"--- {path}\n" + "".join(
                f"{n:>4} {line}\n" for n, line in enumerate(Path(path).read_text().splitlines(), 1)
            )
            if estimate(block) > budget:
                bundle.skipped.append((path, "over budget"))
                continue
            budget -= estimate(block)
            bundle.blocks.append(block)
            bundle.included.append(path)
        return bundle


async def chat_turn(store: ConversationStore, thread_id: str, n: int, size: int = 10) -> None:
    await store.append(thread_id, "alice", [
        {"role": "user", "content": f"question {n} " + "q" * size},
        {"role": "assistant", "content": f"answer {n} " + "a" * size},
    ], request_id=f"r{n}")  # fmt: skip


def contents(messages: list[dict[str, Any]]) -> list[Any]:
    return [m.get("content") for m in messages]


async def test_a_new_conversation_is_system_then_input() -> None:
    result = await assemble_messages(system_prompt="be brief", new_input="hi", limits=BIG)
    assert result.messages == [{"role": "system", "content": "be brief"},
                               {"role": "user", "content": "hi"}]  # fmt: skip
    assert result.turns_included == result.turns_dropped == 0
    assert result.estimated_tokens == estimator_for("kimi").messages(result.messages)


async def test_turn_n_sees_turn_n_minus_1(store: ConversationStore) -> None:
    thread = await store.create_thread("alice")
    for n in range(1, 4):
        result = await assemble_messages(system_prompt="sys", new_input=f"question {n}",
                                         limits=BIG, store=store, thread_id=thread.id,
                                         owner="alice")  # fmt: skip
        assert result.messages[-1] == {"role": "user", "content": f"question {n}"}
        if n > 1:
            assert result.messages[-2] == {"role": "assistant", "content": f"answer {n - 1}"}
            assert result.turns_included == n - 1
        await store.append(thread.id, "alice", [result.messages[-1],
                                                {"role": "assistant", "content": f"answer {n}"}],
                           request_id=f"r{n}")  # fmt: skip
    assert contents(result.messages) == ["sys", "question 1", "answer 1", "question 2",
                                         "answer 2", "question 3"]  # fmt: skip


async def test_trimming_keeps_the_newest_turns_and_says_how_many_were_dropped(
    store: ConversationStore,
) -> None:
    thread = await store.create_thread("alice")
    for n in range(1, 41):
        await chat_turn(store, thread.id, n, size=300)
    limits = ContextLimits(context_window=3_000, max_output_tokens=500, family="glm")
    # One turn at a time, the window is as full as it can be (blocks: tests/store/test_window.py).
    result = await assemble_messages(system_prompt="sys", new_input="next", limits=limits,
                                     store=store, thread_id=thread.id, owner="alice",
                                     low_water=1.0)  # fmt: skip
    kept, dropped = result.turns_included, result.turns_dropped
    assert 0 < kept < 40 and kept + dropped == 40
    assert result.estimated_tokens <= 3_000 - 500
    assert result.messages[1] == {"role": "system", "content": (
        f"Note: the {dropped} earliest turns of this conversation are left out because they do "
        "not fit the model's context window.")}  # fmt: skip
    history = result.messages[2:-1]
    assert [m["content"].split()[1] for m in history[::2]] == [
        str(n) for n in range(41 - kept, 41)]  # fmt: skip
    # One more turn would not have fitted.
    one_more = estimator_for("glm").message({"role": "user", "content": "question 1 " + "q" * 300})
    assert result.estimated_tokens + 2 * one_more > 3_000 - 500


async def test_tool_call_groups_are_kept_or_dropped_whole(store: ConversationStore) -> None:
    thread = await store.create_thread("alice")
    for n in range(1, 13):
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "$web_search", "arguments": '{"query": "' + "x" * 200 + '"}'},
        }
        await store.append(thread.id, "alice", [
            {"role": "user", "content": f"q{n}"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "r" * 300},
            {"role": "assistant", "content": f"a{n}"},
        ], request_id=f"r{n}")  # fmt: skip
    for window in range(900, 2_400, 97):
        limits = ContextLimits(context_window=window, max_output_tokens=100, family="kimi")
        result = await assemble_messages(
            system_prompt=None, new_input="go", limits=limits, store=store, thread_id=thread.id,
            owner="alice",
        )  # fmt: skip
        history = [m for m in result.messages if m["role"] != "system"][:-1]
        assert len(history) % 4 == 0
        for start in range(0, len(history), 4):
            group = history[start : start + 4]
            assert [m["role"] for m in group] == ["user", "assistant", "tool", "assistant"]
            assert group[1]["tool_calls"][0]["id"] == group[2]["tool_call_id"]
        assert result.estimated_tokens <= window - 100


async def test_a_prompt_larger_than_the_window_is_context_too_long(
    store: ConversationStore,
) -> None:
    thread = await store.create_thread("alice")
    await chat_turn(store, thread.id, 1)
    limits = ContextLimits(context_window=1_000, max_output_tokens=200, family="kimi")
    with pytest.raises(ContextTooLongError, match="context window"):
        await assemble_messages(system_prompt="s", new_input="word " * 1_000, limits=limits,
                                store=store, thread_id=thread.id, owner="alice")  # fmt: skip


async def test_another_owner_cannot_continue(store: ConversationStore) -> None:
    thread = await store.create_thread("alice")
    with pytest.raises(ConversationNotFoundError):
        await assemble_messages(system_prompt=None, new_input="hi", limits=BIG, store=store,
                                thread_id=thread.id, owner="bob")  # fmt: skip


async def test_files_newest_reference_wins_and_are_read_fresh(
    store: ConversationStore, tmp_path: Path
) -> None:
    a, b, c = (tmp_path / name for name in ("a.py", "b.py", "c.py"))
    for path in (a, b, c):
        path.write_text(f"old {path.name}\n")
    thread = await store.create_thread("alice")
    await store.append(thread.id, "alice", [{"role": "user", "content": "1"}], request_id="r1",
                       files=[str(a), str(b)])  # fmt: skip
    await store.append(thread.id, "alice", [{"role": "user", "content": "2"}], request_id="r2",
                       files=[str(a)])  # fmt: skip
    a.write_text("new a.py\n")
    reader = DiskReader()
    result = await assemble_messages(
        system_prompt="sys", new_input="3", limits=BIG, store=store, thread_id=thread.id,
        owner="alice", files=[str(c), str(a)], roots=[str(tmp_path)], read_files=reader,
    )  # fmt: skip
    assert [paths for paths, _ in reader.calls] == [[str(c), str(a)], [str(b)]]
    assert result.files_included == [str(c), str(a), str(b)]
    files_message = result.messages[-2]
    assert files_message["role"] == "user" and result.messages[-1]["content"] == "3"
    assert "new a.py" in files_message["content"] and "old a.py" not in files_message["content"]
    assert files_message["content"].count(f"--- {a}\n") == 1


async def test_files_share_the_budget_and_are_skipped_when_it_runs_out(
    store: ConversationStore, tmp_path: Path
) -> None:
    big = tmp_path / "big.txt"
    big.write_text("word " * 5_000 + "\n")
    small = tmp_path / "small.txt"
    small.write_text("tiny\n")
    limits = ContextLimits(context_window=2_000, max_output_tokens=500, family="kimi")
    reader = DiskReader()
    result = await assemble_messages(system_prompt=None, new_input="look", limits=limits,
                                     files=[str(big), str(small), "/elsewhere/x"],
                                     roots=[str(tmp_path)], read_files=reader)  # fmt: skip
    assert reader.calls[0][1] < 2_000 - 500
    assert result.files_included == [str(small)]
    assert dict(result.files_skipped) == {
        str(big): "over budget",
        "/elsewhere/x": "outside the allowed roots",
    }
    assert result.estimated_tokens <= 2_000 - 500


async def test_files_through_the_real_reader(store: ConversationStore, tmp_path: Path) -> None:
    files = pytest.importorskip("exai.files")
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    return 1\n")
    thread = await store.create_thread("alice")
    await store.append(thread.id, "alice", [{"role": "user", "content": "see"}],
                       request_id="r1", files=[str(source)])  # fmt: skip
    gone = tmp_path / "gone.py"
    gone.write_text("x = 1\n")
    await store.append(thread.id, "alice", [{"role": "user", "content": "and"}],
                       request_id="r2", files=[str(gone)])  # fmt: skip
    gone.unlink()
    source.write_text("def f():\n    return 2\n")
    result = await assemble_messages(
        system_prompt=None, new_input="again", limits=BIG, store=store, thread_id=thread.id,
        owner="alice", roots=[str(tmp_path)], read_files=files.read_files,
    )  # fmt: skip
    assert result.files_included == [str(source)]
    assert [path for path, _ in result.files_skipped] == [str(gone)]
    assert "return 2" in result.messages[-2]["content"]
    with pytest.raises(ExaiError):  # a bad path in the new input is the caller's error
        await assemble_messages(system_prompt=None, new_input="more", limits=BIG,
                                files=[str(gone)], roots=[str(tmp_path)],
                                read_files=files.read_files)  # fmt: skip
