"""The OpenAI-compatible endpoint, driven by the real ``openai`` SDK against a real
daemon and the provider emulator."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from exai.app import App
from tests.conftest import emulated_providers, make_settings, running_daemon

TOKENS = {"alice": "tok-alice-0123456789", "bob": "tok-bob-0123456789"}
KIMI = "kimi-k2.6"
ASK = [{"role": "user", "content": "x"}]


def _settings(tmp_path, emulator, **overrides):
    tokens = ",".join(f"{name}={token}" for name, token in TOKENS.items())
    return make_settings(tmp_path, ws_tokens=tokens, **{**emulated_providers(emulator),
                                                        **overrides})  # fmt: skip


@pytest.fixture
async def daemon(tmp_path, emulator) -> AsyncIterator[App]:
    settings = _settings(tmp_path, emulator, stream_min_chunk_chars=1, stream_max_chunk_chars=16)
    async with running_daemon(settings) as running:
        yield running


def _base_url(daemon: App) -> str:
    return f"http://127.0.0.1:{daemon.web.port}/v1"


@pytest.fixture
async def sdk(daemon) -> AsyncIterator[dict[str, AsyncOpenAI]]:
    """An SDK client per principal, without the SDK's own retries (so a test sees
    exactly one answer per request)."""
    clients = {name: AsyncOpenAI(base_url=_base_url(daemon), api_key=token, max_retries=0)
               for name, token in TOKENS.items()}  # fmt: skip
    yield clients
    for client in clients.values():
        await client.close()


# --- /v1/models -----------------------------------------------------------------


async def test_models_are_the_configured_ones_with_auto_and_aliases(tmp_path, emulator):
    only_kimi = {"glm_api_key": None}
    async with running_daemon(_settings(tmp_path, emulator, **only_kimi)) as daemon:
        async with AsyncOpenAI(base_url=_base_url(daemon), api_key=TOKENS["alice"]) as client:
            page = await client.models.list()
            alias = await client.models.retrieve("k2")
            with pytest.raises(openai.NotFoundError):
                await client.models.retrieve("gpt-17-ultra")
    ids = [m.id for m in page.data]
    assert ids[0] == "auto" and KIMI in ids and "k2" in ids
    assert not any(i.startswith("glm") for i in ids)  # GLM has no key here
    assert all(m.object == "model" and m.owned_by for m in page.data)
    entry = next(m for m in page.data if m.id == KIMI)
    assert entry.owned_by == "kimi" and entry.exai["context_window"] > 0
    assert page.data[0].exai["routes_to"] in ids
    assert alias.exai == {"alias_of": KIMI}


# --- stateless ------------------------------------------------------------------

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "first answer"},
    {"role": "user", "content": "second question"},
]


async def test_without_a_thread_the_messages_go_to_the_model_as_given(daemon, sdk, emulator):
    completion = await sdk["alice"].chat.completions.create(model=KIMI, messages=CONVERSATION)
    (sent,) = emulator.requests
    assert sent["body"]["messages"] == CONVERSATION
    answer = completion.choices[0].message.content
    assert answer == "emulated reply #2 to: second question (saw 4 messages)"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.object == "chat.completion" and completion.model == KIMI
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert completion.exai["tool"] == "completion" and "continuation_id" not in completion.exai
    await daemon.services.sessions.settled()  # kept as an agent session, after the answer
    assert [t.face for t in await daemon.services.store.list_threads()] == ["openai"]


async def test_model_auto_chooses_a_configured_model(daemon, sdk, emulator):
    completion = await sdk["alice"].chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "hello"}], max_tokens=2
    )
    assert completion.model in {m.name for m in daemon.services.providers.catalogue}
    assert completion.exai["provider"] in ("kimi", "glm")
    assert emulator.requests[-1]["body"]["max_tokens"] == 2
    assert completion.choices[0].finish_reason == "length"


# --- threads --------------------------------------------------------------------


async def test_a_thread_is_started_then_continued_with_only_the_new_message(daemon, sdk, emulator):
    alice = sdk["alice"].chat.completions
    raw = await alice.with_raw_response.create(
        model=KIMI,
        messages=[{"role": "system", "content": "Answer as a pirate."},
                  {"role": "user", "content": "remember the word PELICAN"}],
        metadata={"exai_thread": "new"},
    )  # fmt: skip
    first = raw.parse()
    cid = first.exai["continuation_id"]
    assert uuid.UUID(cid) and raw.headers["x-exai-thread"] == cid
    assert first.exai["thread_started"] is True and first.exai["tool"] == "chat"
    first_answer = first.choices[0].message.content

    second = await alice.create(
        model=KIMI,
        messages=[{"role": "user", "content": "what was the word?"}],
        extra_headers={"X-Exai-Thread": cid},
    )
    assert second.exai["continuation_id"] == cid and second.exai["thread_started"] is False
    assert emulator.requests[-1]["body"]["messages"] == [
        {"role": "system", "content": "Answer as a pirate."},
        {"role": "user", "content": "remember the word PELICAN"},
        {"role": "assistant", "content": first_answer},
        {"role": "user", "content": "what was the word?"},
    ]
    stored = await daemon.services.store.messages(cid, "alice")
    assert [(m.role, m.content) for m in stored] == [
        ("user", "remember the word PELICAN"),
        ("assistant", first_answer),
        ("user", "what was the word?"),
        ("assistant", second.choices[0].message.content),
    ]


async def test_history_sent_by_the_client_is_replaced_by_the_threads(daemon, sdk, emulator):
    alice = sdk["alice"].chat.completions
    first = await alice.create(model=KIMI, messages=[{"role": "user", "content": "one"}],
                               metadata={"exai_thread": "new"})  # fmt: skip
    cid = first.exai["continuation_id"]
    second = await alice.create(
        model=KIMI,
        messages=[{"role": "system", "content": "ignored: the thread has its prompt"},
                  {"role": "user", "content": "a turn the thread never had"},
                  {"role": "assistant", "content": "nor this"},
                  {"role": "user", "content": "two"}],
        metadata={"exai_thread": cid},
    )  # fmt: skip
    assert second.exai["messages_ignored"] == 3
    sent = [m["content"] for m in emulator.requests[-1]["body"]["messages"][1:]]
    assert sent == ["one", first.choices[0].message.content, "two"]


async def test_another_principals_thread_is_not_found(daemon, sdk, emulator):
    first = await sdk["alice"].chat.completions.create(
        model=KIMI, messages=[{"role": "user", "content": "private"}],
        metadata={"exai_thread": "new"},
    )  # fmt: skip
    cid = first.exai["continuation_id"]
    with pytest.raises(openai.NotFoundError) as caught:
        await sdk["bob"].chat.completions.create(
            model=KIMI, messages=[{"role": "user", "content": "let me in"}],
            extra_headers={"X-Exai-Thread": cid},
        )  # fmt: skip
    assert caught.value.body["code"] == "thread_not_found"
    assert caught.value.body["param"] == "metadata.exai_thread"
    assert len(emulator.requests) == 1  # only alice's


async def test_a_long_answer_in_a_thread_comes_back_whole(tmp_path, emulator):
    long_text = "word " * 6000  # over a 1,000-token result limit: stored as an artifact
    emulator.script({"text": long_text})
    async with running_daemon(_settings(tmp_path, emulator, max_result_tokens=1000)) as daemon:
        async with AsyncOpenAI(base_url=_base_url(daemon), api_key=TOKENS["alice"]) as client:
            completion = await client.chat.completions.create(
                model=KIMI, messages=[{"role": "user", "content": "write a lot"}],
                metadata={"exai_thread": "new"},
            )  # fmt: skip
    assert completion.choices[0].message.content == long_text


# --- streaming ------------------------------------------------------------------


@pytest.mark.parametrize("thread", [None, "new"], ids=["stateless", "new-thread"])
async def test_streamed_chunks_reassemble_the_answer_and_end_with_usage(
    daemon, sdk, emulator, thread
):
    text = "The quick brown fox jumps over the lazy dog, again and again and again."
    emulator.script({"text": text})
    metadata = {"exai_thread": thread} if thread else None
    stream = await sdk["alice"].chat.completions.create(
        model=KIMI, messages=[{"role": "user", "content": "tell me"}], stream=True,
        stream_options={"include_usage": True}, metadata=metadata,
    )  # fmt: skip
    chunks = [chunk async for chunk in stream]
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert "".join(pieces) == text and len(pieces) > 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    finish = chunks[-2]
    assert finish.choices[0].finish_reason == "stop" and finish.model == KIMI
    usage = chunks[-1]
    assert usage.choices == [] and usage.usage.completion_tokens > 0
    assert usage.usage.total_tokens == usage.usage.prompt_tokens + usage.usage.completion_tokens
    if thread:
        cid = finish.exai["continuation_id"]
        stored = await daemon.services.store.messages(cid, "alice")
        assert [m.content for m in stored] == ["tell me", text]
    else:
        await daemon.services.sessions.settled()  # kept as an agent session, after the answer
        assert [t.face for t in await daemon.services.store.list_threads()] == ["openai"]


async def test_a_stream_without_include_usage_has_no_usage_chunk(daemon, sdk):
    stream = await sdk["alice"].chat.completions.create(
        model=KIMI, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in chunks)


async def _cancelled_calls(daemon: App) -> str:
    """The daemon's metrics once no call is running (waiting at most 10 s)."""
    for _ in range(200):
        if not daemon.core.dispatcher.running:
            break
        await asyncio.sleep(0.05)
    assert not daemon.core.dispatcher.running
    return daemon.core.metrics.render().decode()


async def test_a_client_that_leaves_mid_stream_cancels_the_call(daemon, emulator):
    emulator.script({"text": "slow " * 200})
    emulator.configure(chunk_delay_ms=50)  # the whole answer would take about 10 s
    body = {"model": KIMI, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    async with (
        httpx.AsyncClient(base_url=_base_url(daemon), headers=headers) as http,
        http.stream("POST", "/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if '"content": "slow' in line:
                break  # leave after the first words
    metrics = await _cancelled_calls(daemon)
    assert 'exai_calls_total{status="CANCELLED",tool="completion"} 1.0' in metrics


async def test_a_client_that_leaves_before_the_answer_cancels_the_call(daemon, emulator):
    emulator.configure(latency_ms=5000)
    body = {"model": KIMI, "messages": [{"role": "user", "content": "go"}],
            "metadata": {"exai_thread": "new"}}  # fmt: skip
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    async with httpx.AsyncClient(base_url=_base_url(daemon), headers=headers) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post("/chat/completions", json=body, timeout=0.5)
    metrics = await _cancelled_calls(daemon)
    assert 'exai_calls_total{status="CANCELLED",tool="chat"} 1.0' in metrics
    assert await daemon.services.store.list_threads() == []


# --- errors ---------------------------------------------------------------------


async def test_a_bad_token_is_an_authentication_error(daemon):
    async with AsyncOpenAI(base_url=_base_url(daemon), api_key="wrong", max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError) as caught:
            await client.chat.completions.create(model=KIMI, messages=ASK)
    error = caught.value
    assert error.status_code == 401 and error.body["type"] == "authentication_error"
    assert error.body["code"] == "invalid_api_key" and error.body["message"]
    assert error.response.headers["www-authenticate"].startswith("Bearer")


async def test_an_unknown_model_is_not_found_and_says_which_exist(daemon, sdk, emulator):
    with pytest.raises(openai.NotFoundError) as caught:
        await sdk["alice"].chat.completions.create(
            model="gpt-17-ultra", messages=[{"role": "user", "content": "x"}]
        )
    body = caught.value.body
    assert body["code"] == "model_not_found" and body["param"] == "model"
    assert "gpt-17-ultra" in body["message"] and KIMI in body["message"]
    assert emulator.requests == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_provider_that_is_down_is_a_503_in_openais_shape(daemon, sdk, emulator, stream):
    emulator.script({"status": 503})
    with pytest.raises(openai.APIStatusError) as caught:
        await sdk["alice"].chat.completions.create(
            model=KIMI, messages=[{"role": "user", "content": "x"}], stream=stream
        )
    error = caught.value
    assert error.status_code == 503
    assert set(error.body) >= {"message", "type", "param", "code"}
    assert error.body["code"] == "provider_error" and error.body["exai"]["retryable"] is True
    assert error.response.headers["x-should-retry"] == "true"


async def test_the_rate_limit_is_a_rate_limit_error_with_retry_after(tmp_path, emulator):
    limited = _settings(tmp_path, emulator, rate_limit_per_min=1, rate_limit_burst=1)
    async with running_daemon(limited) as daemon:
        async with AsyncOpenAI(base_url=_base_url(daemon), api_key=TOKENS["alice"],
                               max_retries=0) as client:  # fmt: skip
            messages = [{"role": "user", "content": "x"}]
            await client.chat.completions.create(model=KIMI, messages=messages)
            with pytest.raises(openai.RateLimitError) as caught:
                await client.chat.completions.create(model=KIMI, messages=messages)
    error = caught.value
    assert error.body["type"] == "rate_limit_error" and error.body["exai"]["code"] == "RATE_LIMITED"
    assert int(error.response.headers["retry-after"]) >= 1
    assert len(emulator.requests) == 1


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"logit_bias": {"1": 1}}, "logit_bias"),
        ({"n": 2}, "n"),
        ({"temperature": 7}, "temperature"),
        ({"metadata": {"exai_thread": "yesterday's"}}, "metadata.exai_thread"),
    ],
    ids=["logit_bias", "n", "temperature", "thread"],
)
async def test_requests_exai_cannot_serve_are_bad_requests(one_daemon, emulator, extra, param):
    alice = AsyncOpenAI(base_url=_base_url(one_daemon.app), api_key=TOKENS["alice"],
                        max_retries=0)  # fmt: skip
    async with alice:
        with pytest.raises(openai.BadRequestError) as caught:
            await alice.chat.completions.create(
                model=KIMI, messages=[{"role": "user", "content": "x"}], **extra
            )
    assert caught.value.body["param"] == param and caught.value.body["message"]
    assert emulator.requests == []


async def test_a_principal_without_the_scope_is_forbidden(tmp_path, emulator):
    from exai.auth import issue_token

    secret = "openai-test-secret-0123456789abcdef"
    async with running_daemon(_settings(tmp_path, emulator, jwt_secret=secret)) as daemon:
        token = issue_token(secret, "carol", ["chat"])  # threads yes, the raw proxy no
        async with AsyncOpenAI(base_url=_base_url(daemon), api_key=token) as client:
            with pytest.raises(openai.PermissionDeniedError):
                await client.chat.completions.create(model=KIMI, messages=ASK)
            threaded = await client.chat.completions.create(
                model=KIMI, messages=ASK, metadata={"exai_thread": "new"}
            )
    assert threaded.exai["continuation_id"]


async def test_a_foreign_origin_is_refused_in_openais_shape(daemon):
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{daemon.web.port}") as http:
        refused = await http.post(
            "/v1/chat/completions",
            headers={
                "Origin": "https://evil.example",
                "Authorization": f"Bearer {TOKENS['alice']}",
            },
            json={"model": KIMI, "messages": [{"role": "user", "content": "x"}]},
        )
        mcp = await http.post("/mcp", json={})
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "permission_error"
    # The other faces keep exai's own error body.
    assert mcp.status_code == 401 and mcp.json()["error"]["code"] == "UNAUTHORIZED"


async def test_invalid_json_and_unknown_paths_answer_in_openais_shape(daemon):
    headers = {"Authorization": f"Bearer {TOKENS['alice']}", "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=_base_url(daemon), headers=headers) as http:
        garbled = await http.post("/chat/completions", content=b"{not json")
        elsewhere = await http.post("/embeddings", content=json.dumps({"input": "x"}))
    assert garbled.status_code == 400 and garbled.json()["error"]["type"] == "invalid_request_error"
    assert elsewhere.status_code == 404 and "/v1/embeddings" in elsewhere.json()["error"]["message"]
