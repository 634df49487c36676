"""The Kimi plugin through the real ``openai`` SDK against the provider emulator."""

from __future__ import annotations

import asyncio
import json

import pytest

from exai.emulators.provider import EmulatorServer
from exai.errors import ContextTooLongError, ExaiError, ProviderError, RateLimitedError
from exai.providers.base import ChatRequest, Delta
from exai.providers.kimi import KimiProvider

from .helpers import overlapping, user


def request(text: str = "hello", **kw: object) -> ChatRequest:
    """Kimi K2.6 with thinking off: a plain answer, no reasoning to carry back."""
    kw.setdefault("thinking", False)
    return ChatRequest(model="kimi-k2.6", messages=user(text), **kw)


async def collect(kimi: KimiProvider, req: ChatRequest) -> list[Delta]:
    return [delta async for delta in kimi.stream(req)]


async def test_reply_shows_what_the_model_saw(kimi: KimiProvider, emulator: EmulatorServer) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "second"},
    ]
    response = await kimi.complete(ChatRequest(model="kimi-k2.6", messages=messages))

    assert response.text == "emulated reply #2 to: second (saw 4 messages)"
    assert response.provider == "kimi" and response.finish_reason == "stop"
    assert response.usage.completion_tokens > 0 and response.retries == 0
    # K2.6 thinks by default: the answer keeps its reasoning, for Preserved Thinking.
    assert response.reasoning == "emulated reasoning about: second"
    assert response.messages == [{"role": "assistant", "content": response.text,
                                  "reasoning_content": response.reasoning}]  # fmt: skip
    sent = emulator.requests[0]
    assert sent["body"]["messages"] == messages
    assert sent["headers"]["authorization"] == "Bearer sk-test"


async def test_only_given_parameters_are_sent(kimi: KimiProvider, emulator: EmulatorServer) -> None:
    await kimi.complete(request(thinking=None))
    # K2.6 takes only 0.6 without thinking; the plugin sends what it is given.
    await kimi.complete(request(temperature=0.6, max_output_tokens=500))

    bare, full = (r["body"] for r in emulator.requests)
    assert set(bare) == {"model", "messages"}
    assert full["temperature"] == 0.6 and full["thinking"] == {"type": "disabled"}
    # Moonshot deprecates max_tokens: the cap goes as max_completion_tokens only.
    assert full["max_completion_tokens"] == 500 and "max_tokens" not in full


async def test_web_search_round_trip_echoes_the_arguments(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    response = await kimi.complete(request("news today", web_search=True))

    first, second = emulator.requests
    assert first["body"]["tools"] == [
        {"type": "builtin_function", "function": {"name": "$web_search"}}
    ]
    call = second["body"]["messages"][1]["tool_calls"][0]
    assert call["function"]["name"] == "$web_search"
    tool_message = second["body"]["messages"][2]
    assert tool_message == {
        "role": "tool",
        "tool_call_id": call["id"],
        "name": "$web_search",
        "content": call["function"]["arguments"],
    }
    assert json.loads(tool_message["content"])["search_result"]["search_id"]
    assert response.text.startswith("emulated reply #1 to: news today")
    roles = [m["role"] for m in response.messages]
    assert roles == ["assistant", "tool", "assistant"]


async def test_web_search_rounds_are_bounded(kimi: KimiProvider, emulator: EmulatorServer) -> None:
    # The emulator asks to search again whenever no tool result follows the user
    # message; a model that never stops asking must not loop forever.
    kimi.max_tool_rounds = 0
    with pytest.raises(ProviderError, match="still calling tools"):
        await kimi.complete(request(web_search=True))
    assert len(emulator.requests) == 1


async def test_streamed_web_search(kimi: KimiProvider, emulator: EmulatorServer) -> None:
    deltas = await collect(kimi, request("stream search", web_search=True))

    kinds = [d.kind for d in deltas]
    # exai answers $web_search itself: the caller sees no tool call, only the answer.
    assert "tool_call" not in kinds and "tool_arguments" not in kinds and kinds[-1] == "done"
    text = "".join(d.text for d in deltas if d.kind == "text")
    assert text == deltas[-1].response.text
    assert emulator.requests[1]["body"]["messages"][2]["role"] == "tool"


async def test_length_continues_with_partial_mode(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    response = await kimi.complete(request("a long question", max_output_tokens=4))

    assert response.text == "emulated reply #1 to: a long question (saw 1 messages)"
    assert response.finish_reason == "stop"
    continued = emulator.requests[1]["body"]["messages"]
    assert continued[-1] == {"role": "assistant", "content": "emulated reply #1 to: ",
                             "partial": True}  # fmt: skip
    assert len(emulator.requests) == 3
    assert all(r["body"]["max_completion_tokens"] == 4 for r in emulator.requests)


async def test_a_thinking_continuation_carries_the_reasoning_so_far(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    # Moonshot refuses a thinking model's partial continuation without its reasoning.
    response = await kimi.complete(request("a long question", thinking=None,
                                           max_output_tokens=4))  # fmt: skip

    assert response.text == "emulated reply #1 to: a long question (saw 1 messages)"
    assert response.reasoning == "emulated reasoning about: a long question"
    cut = emulator.requests[1]["body"]["messages"][-1]
    assert cut == {"role": "assistant", "content": "emulated reply #1 to: ", "partial": True,
                   "reasoning_content": response.reasoning}  # fmt: skip
    assert len(emulator.requests) == 3


async def test_length_continuations_are_bounded(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    kimi.max_continuations = 1
    response = await kimi.complete(request("a long question", max_output_tokens=2))

    assert response.finish_reason == "length"
    assert response.text == "emulated reply #1 to: "
    assert len(emulator.requests) == 2


async def test_a_reply_capped_on_purpose_is_not_continued(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    capped = request("a long question", max_output_tokens=2, continue_cut=False)
    response = await kimi.complete(capped)

    assert response.finish_reason == "length"
    assert response.text == "emulated reply "
    assert len(emulator.requests) == 1


async def test_reasoning_is_kept_apart(kimi: KimiProvider) -> None:
    req = ChatRequest(model="kimi-k2.7-code", messages=user("why?"))  # always thinks
    response = await kimi.complete(req)
    deltas = await collect(kimi, req)

    assert response.reasoning == "emulated reasoning about: why?"
    assert "reasoning" not in response.text
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == response.reasoning
    assert "".join(d.text for d in deltas if d.kind == "text") == response.text


async def test_stream_matches_complete(kimi: KimiProvider) -> None:
    deltas = await collect(kimi, request("stream me"))

    done = deltas[-1]
    assert done.kind == "done" and done.response is not None
    assert "".join(d.text for d in deltas if d.kind == "text") == done.response.text
    assert done.response.text == "emulated reply #1 to: stream me (saw 1 messages)"
    assert done.response.usage.completion_tokens > 0  # Moonshot's usage in the last choice


@pytest.mark.parametrize(
    ("script", "error", "retryable", "words"),
    [
        ({"status": 400, "error": "context_length"}, ContextTooLongError, False, "context window"),
        ({"status": 401}, ProviderError, False, "KIMI_API_KEY"),
        ({"status": 429, "error": "balance"}, ProviderError, False, "balance"),
        ({"status": 403, "error": "balance"}, ProviderError, False, "balance"),
        ({"status": 400, "error": "bad_request"}, ProviderError, False, "rejected"),
    ],
)
async def test_errors_that_are_never_retried(
    kimi: KimiProvider,
    emulator: EmulatorServer,
    script: dict[str, object],
    error: type[ExaiError],
    retryable: bool,
    words: str,
) -> None:
    emulator.script(script)
    with pytest.raises(error, match=words) as caught:
        await kimi.complete(request())
    assert caught.value.retryable is retryable
    assert len(emulator.requests) == 1


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_rate_limits_and_server_errors_are_retried(
    kimi: KimiProvider, emulator: EmulatorServer, status: int
) -> None:
    emulator.script(
        {"status": status, "retry_after_ms": 10}, {"status": status, "retry_after_ms": 10}
    )
    response = await kimi.complete(request())

    assert response.retries == 2
    assert len(emulator.requests) == 3


async def test_retries_give_up_with_the_mapped_error(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    emulator.script(*[{"status": 503}] * 4)
    with pytest.raises(ProviderError) as caught:
        await kimi.complete(request())
    assert caught.value.retryable and caught.value.details["retries"] == 3
    assert len(emulator.requests) == 4


async def test_retry_after_is_honoured(kimi: KimiProvider, emulator: EmulatorServer) -> None:
    emulator.script({"status": 429, "retry_after_ms": 300})
    await kimi.complete(request())

    first, second = emulator.requests
    assert second["received_at"] - first["answered_at"] >= 0.3


async def test_retry_after_seconds_header_is_honoured(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"status": 429, "retry_after": 1})
    await kimi.complete(request())

    first, second = emulator.requests
    assert second["received_at"] - first["answered_at"] >= 1.0


async def test_rate_limit_exhausted_reports_retry_after(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    kimi.retry = type(kimi.retry)(max_retries=0)
    emulator.script({"status": 429, "retry_after": 7})
    with pytest.raises(RateLimitedError) as caught:
        await kimi.complete(request())
    assert caught.value.retry_after_s == 7.0


async def test_long_retry_after_is_handed_to_the_caller(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"status": 429, "retry_after": 3600})
    with pytest.raises(RateLimitedError):
        await kimi.complete(request())
    assert len(emulator.requests) == 1


async def test_stream_errors_before_the_first_chunk_are_retried(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"status": 500})
    deltas = await collect(kimi, request())
    assert deltas[-1].response is not None and deltas[-1].response.retries == 1


async def test_error_mid_stream_is_a_provider_error(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"fail_after_chunks": 3})
    seen: list[Delta] = []
    with pytest.raises(ProviderError, match="broke off"):
        async for delta in kimi.stream(request()):
            seen.append(delta)
    assert [d.kind for d in seen] == ["text", "text"]
    assert len(emulator.requests) == 1


async def test_unreachable_endpoint_is_a_retryable_provider_error() -> None:
    from .helpers import FAST_RETRY

    provider = KimiProvider(api_key="sk", base_url="http://127.0.0.1:9/v1", retry=FAST_RETRY)
    try:
        with pytest.raises(ProviderError, match="cannot reach Kimi") as caught:
            await provider.complete(request())
        assert caught.value.retryable and caught.value.details["retries"] == 3
    finally:
        await provider.aclose()


async def test_concurrent_calls_overlap(kimi: KimiProvider, emulator: EmulatorServer) -> None:
    emulator.configure(latency_ms=300)
    await asyncio.gather(*(kimi.complete(request(f"q{i}")) for i in range(16)))
    assert overlapping(emulator.requests)


def test_unconfigured_without_a_key() -> None:
    assert not KimiProvider(api_key=None).configured()
