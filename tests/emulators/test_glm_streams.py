"""Z.ai's replies that end abnormally, and the shape of its streamed tool calls
(rules G-5, G-6, G-7), through zai-sdk and raw SSE."""

from __future__ import annotations

import json
from typing import Any

import pytest
from zai import ZaiClient

from exai.emulators.provider import EmulatorServer

from .helpers import events, post, user

WHOLE = "emulated reply #1 to: hello (saw 1 messages)"
READ = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}


def streamed(client: ZaiClient, model: str = "glm-4.6", text: str = "hello") -> tuple[str, Any]:
    """(joined content, last finish_reason) of a zai-sdk stream."""
    content, finish = "", None
    for chunk in client.chat.completions.create(model=model, messages=user(text), stream=True):
        choice = chunk.choices[0]
        content += choice.delta.content or ""
        finish = choice.finish_reason or finish
    return content, finish


# [G-5] Abnormal ends are finish reasons.


def test_sensitive_empties_the_reply(zai: ZaiClient, emulator: EmulatorServer) -> None:
    emulator.script({"finish_reason": "sensitive"}, {"finish_reason": "sensitive"})
    whole = zai.chat.completions.create(model="glm-4.6", messages=user())
    assert whole.choices[0].finish_reason == "sensitive"
    assert whole.choices[0].message.content == ""
    assert streamed(zai) == ("", "sensitive")


def test_network_error_keeps_part_of_the_text(zai: ZaiClient, emulator: EmulatorServer) -> None:
    emulator.script({"finish_reason": "network_error"}, {"finish_reason": "network_error"})
    whole = zai.chat.completions.create(model="glm-4.6", messages=user())
    content = whole.choices[0].message.content
    assert whole.choices[0].finish_reason == "network_error"
    assert content and WHOLE.startswith(content) and content != WHOLE
    text, finish = streamed(zai)
    assert finish == "network_error" and text == content


def test_a_marker_or_scripted_text_sets_the_cut(zai: ZaiClient, emulator: EmulatorServer) -> None:
    marked = zai.chat.completions.create(
        model="glm-4.6", messages=user("[emulate:finish_reason=network_error] hello there")
    )
    assert marked.choices[0].finish_reason == "network_error"
    emulator.script({"finish_reason": "network_error", "text": "half of it"})
    scripted = zai.chat.completions.create(model="glm-4.6", messages=user())
    assert scripted.choices[0].message.content == "half of it"


def test_an_over_long_prompt_is_a_finish_reason(zai: ZaiClient, emulator: EmulatorServer) -> None:
    emulator.configure(max_prompt_tokens=3)
    long = user("one two three four")
    whole = zai.chat.completions.create(model="glm-5.1", messages=long)
    assert whole.choices[0].finish_reason == "model_context_window_exceeded"
    assert whole.choices[0].message.content == "" and whole.usage.prompt_tokens == 4
    assert streamed(zai, "glm-5.1", "one two three four") == ("", "model_context_window_exceeded")
    assert post(emulator, "kimi", {"model": "kimi-k2.6", "messages": long}).status_code == 400


def test_a_scripted_context_length_error_on_glm_is_the_finish_reason(
    zai: ZaiClient, emulator: EmulatorServer
) -> None:
    emulator.script({"status": 400, "error": "context_length"})
    answer = zai.chat.completions.create(model="glm-4.6", messages=user())
    assert answer.choices[0].finish_reason == "model_context_window_exceeded"


# [G-6] tool_stream: name with the first fragment, id repeated, last fragment on the finish.

ARGUMENTS = {"path": "a/rather/long/path/to/read.py", "lines": [1, 2, 3]}


def tool_pieces(emulator: EmulatorServer, calls: int = 1) -> list[dict[str, Any]]:
    emulator.script({"tool_calls": [{"name": "read_file", "arguments": ARGUMENTS}] * calls})
    body = {"model": "glm-5.1", "messages": user(), "tools": [READ], "stream": True,
            "tool_stream": True}  # fmt: skip
    return events(post(emulator, "glm", body))


def test_tool_stream_chunks_are_shaped_as_z_ai_sends_them(emulator: EmulatorServer) -> None:
    chunks = tool_pieces(emulator)
    deltas = [(c["choices"][0], c["choices"][0]["delta"]["tool_calls"][0])
              for c in chunks if c["choices"][0]["delta"].get("tool_calls")]  # fmt: skip
    first, rest = deltas[0][1], [d for _, d in deltas[1:]]
    assert first["function"]["name"] == "read_file" and first["function"]["arguments"]
    assert first["id"].startswith("call_") and first["type"] == "function"
    assert rest and all(d["id"] == first["id"] and "name" not in d["function"] for d in rest)
    finish, last = deltas[-1]
    assert finish["finish_reason"] == "tool_calls" and finish is chunks[-1]["choices"][0]
    assert "usage" in chunks[-1]
    joined = "".join(d["function"]["arguments"] for _, d in deltas)
    assert json.loads(joined) == ARGUMENTS and last["function"]["arguments"]


def test_tool_stream_with_two_calls(emulator: EmulatorServer) -> None:
    chunks = tool_pieces(emulator, calls=2)
    pieces = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks
              if c["choices"][0]["delta"].get("tool_calls")]  # fmt: skip
    for index in (0, 1):
        mine = [p for p in pieces if p["index"] == index]
        assert len({p["id"] for p in mine}) == 1
        assert json.loads("".join(p["function"]["arguments"] for p in mine)) == ARGUMENTS


def test_zai_sdk_reads_the_tool_stream(zai: ZaiClient, emulator: EmulatorServer) -> None:
    emulator.script({"tool_calls": [{"name": "read_file", "arguments": ARGUMENTS}]})
    name, arguments, finish = "", "", None
    for chunk in zai.chat.completions.create(model="glm-5.1", messages=user(), tools=[READ],
                                             stream=True, tool_stream=True):  # fmt: skip
        for call in chunk.choices[0].delta.tool_calls or []:
            name = call.function.name or name
            arguments += call.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert (name, json.loads(arguments), finish) == ("read_file", ARGUMENTS, "tool_calls")


# [G-7] A switch that repeats the name on every piece, as some GLM servers do.


@pytest.mark.parametrize("repeat", [False, True])
def test_the_name_can_be_repeated_on_every_piece(emulator: EmulatorServer, repeat: bool) -> None:
    emulator.configure(glm_tool_stream_repeat_name=repeat)
    pieces = [c["choices"][0]["delta"]["tool_calls"][0] for c in tool_pieces(emulator)
              if c["choices"][0]["delta"].get("tool_calls")]  # fmt: skip
    named = [p["function"].get("name") for p in pieces]
    assert len(pieces) > 2
    assert named == (["read_file"] * len(pieces) if repeat
                     else ["read_file"] + [None] * (len(pieces) - 1))  # fmt: skip
    # A reader that concatenates names, as a naive assembler would, gets it wrong:
    assert ("".join(n or "" for n in named) == "read_file") is not repeat


def test_moonshot_streams_keep_their_own_shape(emulator: EmulatorServer) -> None:
    emulator.script({"tool_calls": [{"name": "read_file", "arguments": ARGUMENTS}]})
    body = {"model": "kimi-k2.6", "messages": user(), "tools": [READ], "stream": True,
            "thinking": {"type": "disabled"}}  # fmt: skip
    chunks = events(post(emulator, "kimi", body))
    pieces = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks
              if c["choices"][0]["delta"].get("tool_calls")]  # fmt: skip
    assert pieces[0]["function"] == {"name": "read_file", "arguments": ""}
    assert all("id" not in p for p in pieces[1:])
    assert "tool_calls" not in chunks[-1]["choices"][0]["delta"]
