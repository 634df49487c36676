"""``completion`` with the caller's own tools and parameters: through a real daemon
over WebSocket, and with a ToolContext built here for a face that asks for
structured stream events. The provider emulator stands in for the vendors."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from exai.auth import Principal
from exai.logs import get_logger
from exai.protocol import ErrorCode, StreamEvent
from exai.providers import ProviderRegistry
from exai.tools.base import Services, ToolContext
from exai.tools.completion import CompletionInput, CompletionTool
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.providers.helpers import READ

STEP = {
    "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}],
    "reasoning": "the README will say",
    "when": {"offers_tool": "read_file"},
}
QUESTION = [{"role": "user", "content": "what is exai?"}]


@pytest.fixture
def settings(tmp_path, emulator):
    def build(**overrides):
        return make_settings(tmp_path, **{**emulated_providers(emulator), **overrides})

    return build


async def test_a_tool_round_and_the_answer_after_it(settings, emulator, client_factory):
    emulator.script(STEP, {"text": "exai is {last_tool_result}", "when": {"last_role": "tool"}})
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        first = await client.call(
            "completion",
            {"messages": QUESTION, "model": "k2", "tools": [READ], "tool_choice": "auto"},
        )
        assert first.error is None, first.error
        meta = first.metadata.model_extra or {}
        assert first.metadata.finish_reason == "tool_calls" and first.outputs[0].text == ""
        (call,) = meta["tool_calls"]
        assert call["type"] == "function" and call["function"]["name"] == "read_file"
        assert json.loads(call["function"]["arguments"]) == {"path": "README.md"}
        assert meta["reasoning"] == STEP["reasoning"]

        history = [
            *QUESTION,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "a daemon"},
        ]
        second = await client.call(
            "completion", {"messages": history, "model": "k2", "tools": [READ]}
        )
        assert second.error is None, second.error
        assert second.outputs[0].text == "exai is a daemon"
        assert second.metadata.finish_reason == "stop"
        assert "tool_calls" not in (second.metadata.model_extra or {})
        assert await daemon.services.store.list_threads() == []
    sent = emulator.requests[-1]["body"]["messages"]
    assert len(sent) == 3 and sent[1]["reasoning_content"] == STEP["reasoning"]


async def test_adaptations_are_reported_in_the_metadata(settings, emulator, client_factory):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call(
            "completion",
            {
                "messages": QUESTION,
                "model": "k2",
                "tools": [READ],
                "tool_choice": "required",
                "temperature": 0.3,
            },
        )
        assert res.error is None, res.error
        notes = (res.metadata.model_extra or {})["notes"]
        assert {n["param"] for n in notes} == {"thinking", "temperature"}
    assert emulator.requests[0]["body"]["thinking"] == {"type": "disabled"}


async def test_parameters_reach_the_vendor(settings, emulator, client_factory):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call(
            "completion",
            {
                "messages": QUESTION,
                "model": "glm-5.1",
                "stop": "(saw",
                "top_p": 0.9,
                "seed": 3,
                "response_format": {"type": "json_object"},
                "max_tokens": 50,
            },
        )
        assert res.error is None, res.error
    body = emulator.requests[0]["body"]
    assert body["stop"] == ["(saw"] and body["top_p"] == 0.9 and body["seed"] == 3
    assert body["response_format"] == {"type": "json_object"} and body["max_tokens"] == 50


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        (
            {"tools": [READ], "tool_choice": {"type": "function", "function": {"name": "x"}}},
            "tool_choice",
        ),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [READ, READ]}, "tools"),
        (
            {"tools": [{"type": "function", "function": {"name": "bad name"}}]},
            "tools.0.function.name",
        ),
        ({"top_p": 1.5}, "top_p"),
        ({"stop": ["", "x"]}, "stop"),
        ({"response_format": {"type": "text", "json_schema": {}}}, "response_format.json_schema"),
        (
            {"messages": [*QUESTION, {"role": "tool", "content": "orphan"}]},
            "messages.1.tool_call_id",
        ),
        ({"parallel_tool_calls": "maybe"}, "parallel_tool_calls"),
    ],
)
async def test_bad_arguments_name_the_field(settings, emulator, client_factory, arguments, field):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("completion", {"messages": QUESTION, **arguments})
        assert res.error is not None and res.error.code == ErrorCode.VALIDATION_ERROR
        fields = [f["field"] for f in res.error.details["fields"]]
        assert field in fields, fields
    assert emulator.requests == []


@pytest.mark.parametrize(
    ("arguments", "param"),
    [
        ({"model": "k2", "seed": 1}, "seed"),
        ({"model": "k2", "top_p": 0.5}, "top_p"),
        ({"model": "glm-5.1", "tools": [READ], "tool_choice": "required"}, "tool_choice"),
        ({"model": "glm-5.1", "stop": ["a", "b"]}, "stop"),
    ],
)
async def test_what_the_model_cannot_serve_is_refused_by_name(
    settings, emulator, client_factory, arguments, param
):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("completion", {"messages": QUESTION, **arguments})
        assert res.error is not None and res.error.code == ErrorCode.VALIDATION_ERROR
        assert res.error.details["param"] == param
    assert emulator.requests == []


# --- streaming to a face that asked for events ----------------------------------------


@pytest.fixture
async def context_for(settings) -> AsyncIterator[Any]:
    registries: list[ProviderRegistry] = []

    def build(*, events: list[Any] | None, chunks: list[str]) -> ToolContext:
        s = settings()
        registry = ProviderRegistry.from_settings(s)
        registries.append(registry)

        async def on_event(delta: Any) -> None:
            assert events is not None
            events.append(delta)

        async def on_chunk(text: str) -> None:
            chunks.append(text)

        return ToolContext(
            request_id="r1",
            session_id="s1",
            principal=Principal("alice"),
            tool="completion",
            deadline=time.monotonic() + 30,
            services=Services(settings=s, providers=registry),
            log=get_logger("test"),
            stream_cb=on_chunk,
            event_cb=on_event if events is not None else None,
        )

    yield build
    for registry in registries:
        await registry.aclose()


async def test_a_face_that_asked_for_events_gets_every_delta(context_for, emulator):
    emulator.script({**STEP, "text": "Reading."})
    events: list[StreamEvent] = []
    chunks: list[str] = []
    context = context_for(events=events, chunks=chunks)
    arguments = CompletionInput.model_validate(
        {"messages": QUESTION, "model": "k2", "tools": [READ], "stream": True}
    )

    result = await CompletionTool().run(arguments, context)

    kinds = [e.kind for e in events]
    assert chunks == []  # no stream_chunk text for a face that takes events
    assert kinds[0] == "reasoning" and "text" in kinds
    assert "usage" not in kinds  # the result carries the usage
    start = kinds.index("tool_call")
    assert events[start].index == 0
    assert events[start].tool_call["function"]["name"] == "read_file"
    arguments_text = "".join(e.text for e in events if e.kind == "tool_arguments")
    assert json.loads(arguments_text) == {"path": "README.md"}
    assert "done" not in kinds  # the whole answer is the tool's result
    assert result.metadata["tool_calls"][0]["id"] == events[start].tool_call["id"]
    assert result.metadata["finish_reason"] == "tool_calls"


async def test_without_events_the_text_streams_as_before(context_for, emulator):
    chunks: list[str] = []
    context = context_for(events=None, chunks=chunks)
    arguments = CompletionInput.model_validate({"messages": QUESTION, "stream": True})

    result = await CompletionTool().run(arguments, context)

    assert "".join(chunks) == result.text and result.text.startswith("emulated reply #1")


async def test_auto_passes_over_a_model_whose_api_refuses_a_parameter(
    settings, emulator, client_factory
):
    # Moonshot's API has no seed; Z.ai's has. "auto" ranks Kimi first, so a request
    # with a seed goes to the best model that takes one; a named Kimi model refuses.
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        routed = await client.call("completion", {"messages": QUESTION, "seed": 7})
        named = await client.call("completion", {"messages": QUESTION, "seed": 7,
                                                 "model": "kimi-k2.6"})  # fmt: skip
    assert routed.error is None, routed.error
    assert routed.metadata.provider == "glm" and emulator.requests[0]["body"]["seed"] == 7
    assert named.error is not None and named.error.code == ErrorCode.VALIDATION_ERROR
    assert named.error.details["param"] == "seed" and len(emulator.requests) == 1
