"""A provider failure exai retried, through each model face to the SDK that asked:
final, so the SDK (which retries 5xx and 429 on its own) asks once."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from tests.web.faces import TOKENS, base_url, faces_daemon

ASK = [{"role": "user", "content": "x"}]
FINAL = "kimi failed on all 2 attempts exai made (its servers failed, HTTP 5xx)"


@pytest.fixture
def failing(emulator):
    emulator.script(*[{"status": 500}] * 20)
    return emulator


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_chat_completions_answers_424_once_exai_has_retried(tmp_path, failing, stream):
    async with faces_daemon(tmp_path, failing, provider_max_retries=1) as daemon:
        async with openai.AsyncOpenAI(base_url=base_url(daemon), api_key=TOKENS["alice"],
                                      max_retries=2) as sdk:  # fmt: skip
            with pytest.raises(openai.APIStatusError) as caught:
                await sdk.chat.completions.create(model="kimi-k2.6", messages=ASK, stream=stream)
    error = caught.value
    assert error.status_code == 424 and error.body["code"] == "provider_error"
    assert error.body["message"].startswith(FINAL)
    assert error.body["exai"] == {"code": "PROVIDER_ERROR", "retryable": False, "retries": 1}
    assert error.response.headers["x-should-retry"] == "false"
    assert len(failing.requests) == 2  # exai's two attempts; the SDK did not ask again


async def test_responses_answers_400_once_exai_has_retried(tmp_path, failing):
    async with faces_daemon(tmp_path, failing, provider_max_retries=1) as daemon:
        async with openai.AsyncOpenAI(base_url=base_url(daemon), api_key=TOKENS["alice"],
                                      max_retries=2) as sdk:  # fmt: skip
            with pytest.raises(openai.BadRequestError) as caught:
                await sdk.responses.create(model="kimi-k2.6", input="x", store=False)
    assert caught.value.body["code"] == "provider_error"
    assert caught.value.body["message"].startswith(FINAL)
    assert len(failing.requests) == 2


async def test_messages_answers_424_once_exai_has_retried(tmp_path, failing):
    async with faces_daemon(tmp_path, failing, provider_max_retries=1) as daemon:
        async with anthropic.AsyncAnthropic(
            base_url=base_url(daemon, ""), api_key=TOKENS["alice"], max_retries=2
        ) as sdk:
            with pytest.raises(anthropic.APIStatusError) as caught:
                await sdk.messages.create(model="kimi-k2.6", max_tokens=16, messages=ASK)
    assert caught.value.status_code == 424
    assert caught.value.body["error"]["type"] == "api_error"
    assert caught.value.body["error"]["message"].startswith(FINAL)
    assert len(failing.requests) == 2


async def test_a_refused_token_says_not_to_retry(tmp_path, emulator):
    """Claude Code tries a 401 eleven times unless the answer says not to."""
    async with faces_daemon(tmp_path, emulator) as daemon, httpx.AsyncClient() as client:
        answer = await client.post(
            base_url(daemon, "/v1/messages"),
            headers={"x-api-key": "no"},
            json={"model": "kimi-k2.6", "max_tokens": 8, "messages": ASK},
        )
    assert answer.status_code == 401 and answer.headers["x-should-retry"] == "false"
    assert answer.json()["error"]["type"] == "authentication_error"
