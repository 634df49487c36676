"""The GLM plugin through the real ``zai-sdk`` against the provider emulator."""

from __future__ import annotations

import asyncio

import pytest
from zai import ZaiClient, ZhipuAiClient

from exai.emulators.provider import EmulatorServer
from exai.errors import ContextTooLongError, ExaiError, ProviderError, RateLimitedError
from exai.providers.base import ChatRequest, Delta
from exai.providers.glm import GLMProvider

from .helpers import overlapping, user


def request(text: str = "hello", **kw: object) -> ChatRequest:
    return ChatRequest(model="glm-4.6", messages=user(text), **kw)


async def collect(glm: GLMProvider, req: ChatRequest) -> list[Delta]:
    return [delta async for delta in glm.stream(req)]


async def test_reply_and_what_was_sent(glm: GLMProvider, emulator: EmulatorServer) -> None:
    messages = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "1"},
                {"role": "user", "content": "two"}]  # fmt: skip
    response = await glm.complete(ChatRequest(model="glm-4.6", messages=messages))

    assert response.text == "emulated reply #2 to: two (saw 3 messages)"
    assert response.provider == "glm" and response.usage.prompt_tokens > 0
    sent = emulator.requests[0]
    assert sent["path"] == "/api/paas/v4/chat/completions"
    assert sent["body"]["messages"] == messages
    assert sent["headers"]["authorization"] == "Bearer glm-test"


async def test_caller_messages_are_not_modified(glm: GLMProvider) -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "look"}]}]
    snapshot = [dict(m) for m in messages]
    await glm.complete(ChatRequest(model="glm-4.5v", messages=messages))
    assert messages == snapshot


async def test_thinking_maps_to_the_thinking_parameter(
    glm: GLMProvider, emulator: EmulatorServer
) -> None:
    on = await glm.complete(request("think", thinking=True))
    off = await glm.complete(request("think", thinking=False))
    await glm.complete(request("think"))

    sent = [r["body"] for r in emulator.requests]
    assert sent[0]["thinking"] == {"type": "enabled"}
    assert sent[1]["thinking"] == {"type": "disabled"}
    assert sent[2].get("thinking") is None  # null: the model's default applies
    assert on.reasoning == "emulated reasoning about: think"
    assert off.reasoning is None
    assert "reasoning" not in on.text


async def test_only_given_parameters_are_sent(glm: GLMProvider, emulator: EmulatorServer) -> None:
    await glm.complete(request())
    await glm.complete(request(temperature=0.5, max_output_tokens=100))

    bare, full = (r["body"] for r in emulator.requests)
    for key in ("temperature", "max_tokens", "tools", "thinking", "request_id"):
        assert bare.get(key) is None, key
    assert full["temperature"] == 0.5 and full["max_tokens"] == 100


async def test_web_search_tool_and_results(glm: GLMProvider, emulator: EmulatorServer) -> None:
    response = await glm.complete(request("latest news", web_search=True))
    deltas = await collect(glm, request("latest news", web_search=True))

    assert emulator.requests[0]["body"]["tools"] == [
        {"type": "web_search", "web_search": {"enable": True, "search_result": True}}
    ]
    assert response.search_results[0]["content"] == "A page about: latest news"
    streamed = deltas[-1].response
    assert streamed is not None and streamed.search_results[0]["link"].startswith("https://")
    assert len(emulator.requests) == 2  # GLM searches on its side: no round trip


async def test_stream(glm: GLMProvider) -> None:
    deltas = await collect(glm, request("stream me", thinking=True))

    done = deltas[-1].response
    assert done is not None
    assert "".join(d.text for d in deltas if d.kind == "text") == done.text
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == done.reasoning
    assert done.usage.completion_tokens > 0


async def test_length_is_continued(glm: GLMProvider, emulator: EmulatorServer) -> None:
    response = await glm.complete(request("cut me", max_output_tokens=3))

    assert response.text == "emulated reply #1 to: cut me (saw 1 messages)"
    second = emulator.requests[1]["body"]["messages"]
    assert second[1] == {"role": "assistant", "content": "emulated reply #1 "}
    assert second[2]["role"] == "user" and "Continue" in second[2]["content"]


@pytest.mark.parametrize(
    ("script", "error", "words"),
    [
        # Z.ai answers an over-long prompt with a 200 ending in
        # finish_reason "model_context_window_exceeded", not an error status.
        (
            {"status": 400, "error": "context_length"},
            ContextTooLongError,
            "model_context_window_exceeded",
        ),
        ({"status": 401}, ProviderError, "GLM_API_KEY"),
        ({"status": 429, "error": "balance"}, ProviderError, "balance"),
        ({"status": 400, "error": "bad_request"}, ProviderError, "rejected"),
    ],
)
async def test_errors_that_are_never_retried(
    glm: GLMProvider,
    emulator: EmulatorServer,
    script: dict[str, object],
    error: type[ExaiError],
    words: str,
) -> None:
    emulator.script(script)
    with pytest.raises(error, match=words) as caught:
        await glm.complete(request())
    assert caught.value.retryable is False
    assert len(emulator.requests) == 1


@pytest.mark.parametrize(
    "script",
    [{"status": 429}, {"status": 429, "error": "overloaded"}, {"status": 500}, {"status": 503}],
)
async def test_rate_limits_and_server_errors_are_retried(
    glm: GLMProvider, emulator: EmulatorServer, script: dict[str, object]
) -> None:
    emulator.script({**script, "retry_after_ms": 10}, {**script, "retry_after_ms": 10})
    response = await glm.complete(request())

    assert response.retries == 2
    assert len(emulator.requests) == 3


async def test_retry_after_is_honoured(glm: GLMProvider, emulator: EmulatorServer) -> None:
    emulator.script({"status": 429, "retry_after_ms": 300})
    await glm.complete(request())

    first, second = emulator.requests
    assert second["received_at"] - first["answered_at"] >= 0.3


async def test_rate_limit_exhausted(glm: GLMProvider, emulator: EmulatorServer) -> None:
    emulator.script(*[{"status": 429, "retry_after_ms": 50}] * 2)
    glm.retry = type(glm.retry)(max_retries=1)
    with pytest.raises(RateLimitedError, match="rate limiting") as caught:
        await glm.complete(request())
    assert caught.value.retry_after_s == 0.05
    assert caught.value.details["retries"] == 1
    assert len(emulator.requests) == 2


async def test_stream_errors_before_the_first_chunk_are_retried(
    glm: GLMProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"status": 503, "retry_after_ms": 10})
    deltas = await collect(glm, request())
    assert deltas[-1].response is not None and deltas[-1].response.retries == 1


async def test_error_mid_stream(glm: GLMProvider, emulator: EmulatorServer) -> None:
    emulator.script({"fail_after_chunks": 2})
    with pytest.raises(ProviderError, match="broke off"):
        await collect(glm, request())
    assert len(emulator.requests) == 1


async def test_calls_run_concurrently(glm: GLMProvider, emulator: EmulatorServer) -> None:
    # Long enough for 16 pool threads to start on a loaded 2-core machine: the test
    # is that they overlap, not how fast they start.
    emulator.configure(latency_ms=1000)
    responses = await asyncio.gather(*(glm.complete(request(f"q{i}")) for i in range(16)))

    assert sorted(r.text for r in responses) == sorted(
        f"emulated reply #1 to: q{i} (saw 1 messages)" for i in range(16)
    )
    assert overlapping(emulator.requests)


async def test_streams_run_concurrently(glm: GLMProvider, emulator: EmulatorServer) -> None:
    emulator.configure(latency_ms=1000, chunk_delay_ms=5)
    await asyncio.gather(*(collect(glm, request(f"s{i}")) for i in range(16)))
    assert overlapping(emulator.requests)


async def test_abandoned_stream_frees_its_thread(
    glm: GLMProvider, emulator: EmulatorServer
) -> None:
    emulator.configure(chunk_delay_ms=20)
    stream = glm.stream(request("a long answer"))
    first = await anext(stream)
    await stream.aclose()
    assert first.kind == "text"
    # The pool thread notices at the next chunk; further calls still get threads.
    assert (await glm.complete(request())).text


async def test_mainland_endpoint_selects_the_zhipu_client() -> None:
    mainland = GLMProvider(api_key="k", base_url="https://open.bigmodel.cn/api/paas/v4")
    international = GLMProvider(api_key="k")
    try:
        assert all(isinstance(c, ZhipuAiClient) for c in mainland._clients)
        assert all(
            isinstance(c, ZaiClient) and not isinstance(c, ZhipuAiClient)
            for c in international._clients
        )
        assert not GLMProvider(api_key=None).configured()
    finally:
        await mainland.aclose()
        await international.aclose()


def test_the_sdk_gets_copies_it_may_change_without_touching_ours():
    from exai.providers.glm import _own_copy

    text = {"role": "user", "content": "hello"}
    image = {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}  # fmt: skip
    for original in (text, image):
        mine = _own_copy(original)
        assert mine == original and mine is not original
        mine["content"] = "rewritten"
    copied = _own_copy(image)
    copied["content"][0]["image_url"]["url"] = "AAAA"  # what the SDK does to image parts
    assert image["content"][0]["image_url"]["url"] == "data:image/png;base64,AAAA"
    assert text["content"] == "hello"
