"""Requests and error bodies for the emulator contract tests."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
from zai.core._errors import APIStatusError as ZaiStatusError

from exai.emulators.provider import EmulatorServer


def user(text: str = "hello") -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def post(emulator: EmulatorServer, vendor: str, body: dict[str, Any]) -> httpx.Response:
    """A chat-completions request over raw HTTP."""
    base = emulator.base_url_kimi if vendor == "kimi" else emulator.base_url_glm
    return httpx.post(f"{base}/chat/completions", json=body,
                      headers={"Authorization": "Bearer k"}, timeout=10)  # fmt: skip


def kimi_error(exc: openai.APIStatusError) -> dict[str, Any]:
    """Moonshot's error object, ``{"message", "type"}``, as the SDK received it."""
    inner = exc.response.json()["error"]
    assert set(inner) == {"message", "type"}
    return inner


def zai_error(failed: httpx.Response | ZaiStatusError) -> dict[str, Any]:
    """Z.ai's error object, ``{"code": "<str>", "message"}``, from a response or
    the zai-sdk's error."""
    response = failed if isinstance(failed, httpx.Response) else failed.response
    inner = response.json()["error"]
    assert set(inner) == {"code", "message"} and isinstance(inner["code"], str)
    return inner


def events(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON chunks of an SSE answer, without ``[DONE]``."""
    data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]
