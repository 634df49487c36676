"""The provider emulator itself, spoken to over plain HTTP: control API, markers,
the vendors' error bodies and the SSE framing."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from exai.emulators.provider import EmulatorServer


def chat(emulator: EmulatorServer, vendor: str, body: dict[str, Any]) -> httpx.Response:
    base = emulator.base_url_kimi if vendor == "kimi" else emulator.base_url_glm
    return httpx.post(f"{base}/chat/completions", json=body,
                      headers={"Authorization": "Bearer k"}, timeout=10)  # fmt: skip


def hello(text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "kimi-k2.6", "messages": [{"role": "user", "content": text}],
            **extra}  # fmt: skip


def test_control_api_scripts_configures_and_records(emulator: EmulatorServer) -> None:
    base = emulator.base_url
    script = [{"status": 429, "retry_after": 2}, {"status": 200, "text": "scripted"}]
    assert httpx.post(f"{base}/_emulator/script", json={"responses": script}).status_code == 200
    assert httpx.post(f"{base}/_emulator/config", json={"latency_ms": 1}).json()["latency_ms"] == 1

    limited = chat(emulator, "kimi", hello())
    answered = chat(emulator, "kimi", hello())
    assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
    assert answered.json()["choices"][0]["message"]["content"] == "scripted"
    recorded = httpx.get(f"{base}/_emulator/requests").json()
    assert [r["seq"] for r in recorded] == [1, 2]
    assert recorded[0]["body"]["messages"] == [{"role": "user", "content": "hello"}]

    httpx.post(f"{base}/_emulator/reset")
    assert httpx.get(f"{base}/_emulator/requests").json() == []


def test_control_api_rejects_unknown_fields(emulator: EmulatorServer) -> None:
    bad = httpx.post(f"{emulator.base_url}/_emulator/script", json=[{"stauts": 500}])
    assert bad.status_code == 400 and "stauts" in bad.json()["error"]


def test_marker_in_the_prompt(emulator: EmulatorServer) -> None:
    response = chat(emulator, "glm", hello("[emulate:status=503] please"))
    assert response.status_code == 503
    assert response.json() == {
        "error": {"code": "500", "message": "Service temporarily unavailable"}
    }


@pytest.mark.parametrize(
    ("vendor", "kind", "status", "body"),
    [
        ("kimi", "context_length", 400, {"message": "Invalid request: Your request exceeded model "
         "token limit: 8192", "type": "invalid_request_error"}),
        ("kimi", "auth", 401, {"message": "Invalid Authentication",
                               "type": "invalid_authentication_error"}),
        ("glm", "overloaded", 429, {"code": "1305", "message": "The API has triggered a rate "
         "limit."}),
        ("glm", "rate_limit", 429, {"code": "1302", "message": "High concurrency usage of this "
         "API, please reduce concurrency or contact customer service to increase limits"}),
    ],
)  # fmt: skip
def test_vendor_error_bodies(
    emulator: EmulatorServer, vendor: str, kind: str, status: int, body: dict[str, Any]
) -> None:
    emulator.script({"status": status, "error": kind})
    response = chat(emulator, vendor, hello())
    assert response.status_code == status and response.json() == {"error": body}


def test_prompt_token_limit_gives_the_context_error(emulator: EmulatorServer) -> None:
    emulator.configure(max_prompt_tokens=3)
    assert chat(emulator, "kimi", hello("one two")).status_code == 200
    too_long = chat(emulator, "kimi", hello("one two three four"))
    assert too_long.status_code == 400
    assert "exceeded model token limit: 3" in too_long.json()["error"]["message"]


def test_glm_reports_an_over_long_prompt_as_a_finish_reason(emulator: EmulatorServer) -> None:
    emulator.configure(max_prompt_tokens=3)
    too_long = chat(emulator, "glm", {**hello("one two three four"), "model": "glm-5.1"})
    assert too_long.status_code == 200  # Z.ai: no HTTP error, a finish reason [G-5]
    choice = too_long.json()["choices"][0]
    assert choice["finish_reason"] == "model_context_window_exceeded"
    assert choice["message"]["content"] == ""


def test_api_key_is_checked_when_configured(emulator: EmulatorServer) -> None:
    emulator.configure(api_key="right")
    assert chat(emulator, "kimi", hello()).status_code == 401


def test_sse_framing(emulator: EmulatorServer) -> None:
    response = chat(emulator, "kimi", hello("stream", stream=True))
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line.removeprefix("data: ") for line in response.text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == "emulated reply #1 to: stream (saw 1 messages)"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"][0]["usage"]["completion_tokens"] > 0


def test_glm_stream_reports_usage_at_the_top(emulator: EmulatorServer) -> None:
    response = chat(emulator, "glm", hello("stream", stream=True))
    events = [line.removeprefix("data: ") for line in response.text.split("\n\n") if line]
    assert json.loads(events[-2])["usage"]["total_tokens"] > 0


def test_models_listing(emulator: EmulatorServer) -> None:
    emulator.configure(models=["a", "b"])
    listed = httpx.get(f"{emulator.base_url_kimi}/models").json()
    assert [m["id"] for m in listed["data"]] == ["a", "b"]


def test_binds_loopback_only(emulator: EmulatorServer) -> None:
    assert emulator.base_url.startswith("http://127.0.0.1:")
