"""The provider emulator's tool calls, spoken to over plain HTTP: which requests take
a script, the ids each vendor makes, the SSE shape of streamed calls, and what
the emulated vendors refuse."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from exai.emulators.provider import EmulatorServer

READ = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}
STEP = {
    "tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}],
    "when": {"offers_tool": "read_file"},
}


def chat(emulator: EmulatorServer, vendor: str, body: dict[str, Any]) -> httpx.Response:
    base = emulator.base_url_kimi if vendor == "kimi" else emulator.base_url_glm
    return httpx.post(
        f"{base}/chat/completions", json=body, headers={"Authorization": "Bearer k"}, timeout=10
    )


def body(text: str = "hi", model: str = "kimi-k2.6", **extra: Any) -> dict[str, Any]:
    if model == "kimi-k2.6":  # a plain (not thinking) Moonshot model, unless thinking=None
        extra.setdefault("thinking", {"type": "disabled"})
    if extra.get("thinking", 0) is None:
        del extra["thinking"]
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def events(response: httpx.Response) -> list[dict[str, Any]]:
    data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    return [json.loads(d) for d in data if d != "[DONE]"]


def test_side_requests_do_not_take_the_script(emulator: EmulatorServer) -> None:
    httpx.post(f"{emulator.base_url}/_emulator/script", json=[STEP]).raise_for_status()

    title = chat(emulator, "kimi", body("a title for this chat"))  # no tools: a side request
    step = chat(emulator, "kimi", body("do it", tools=[READ]))

    assert "tool_calls" not in title.json()["choices"][0]["message"]
    choice = step.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"] == {
        "name": "read_file",
        "arguments": '{"path": "a.py"}',
    }


def test_conditions_on_the_last_message_and_the_model(emulator: EmulatorServer) -> None:
    emulator.script(
        {"text": "got {last_tool_result}", "when": {"last_role": "tool", "model": "kimi-k2.6"}}
    )
    tool_round = [
        {"role": "user", "content": "x"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]

    other_model = chat(
        emulator, "kimi",
        {"model": "kimi-k2.7-code", "messages": [*tool_round[:1],
         {**tool_round[1], "reasoning_content": "r"}, *tool_round[2:]]},
    )  # fmt: skip
    right = chat(
        emulator,
        "kimi",
        {"model": "kimi-k2.6", "messages": tool_round, "thinking": {"type": "disabled"}},
    )

    assert other_model.json()["choices"][0]["message"]["content"].startswith("emulated reply")
    assert right.json()["choices"][0]["message"]["content"] == "got 42"


def test_a_bad_condition_is_refused(emulator: EmulatorServer) -> None:
    bad = httpx.post(f"{emulator.base_url}/_emulator/script", json=[{"when": {"colour": "red"}}])
    assert bad.status_code == 400 and "offers_tool" in bad.json()["error"]


def test_ids_are_the_vendors_kind_and_the_same_for_the_same_request(
    emulator: EmulatorServer,
) -> None:
    emulator.script(STEP, STEP, STEP)
    request = body("do it", tools=[READ])
    kimi = chat(emulator, "kimi", request).json()["choices"][0]["message"]["tool_calls"][0]
    glm = [chat(emulator, "glm", {**request, "model": "glm-4.5"}).json() for _ in range(2)]

    assert kimi["id"] == "functions.read_file:0"  # numbered through the conversation
    ids = [g["choices"][0]["message"]["tool_calls"][0]["id"] for g in glm]
    assert ids[0] == ids[1] and ids[0].startswith("call_")


def test_a_forced_choice_calls_the_tool_without_a_script(emulator: EmulatorServer) -> None:
    named = {"type": "function", "function": {"name": "read_file"}}
    forced = chat(emulator, "kimi", body("x", tools=[READ], tool_choice=named))
    none = chat(emulator, "kimi", body("x", tools=[READ], tool_choice="none"))

    assert forced.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == (
        "read_file"
    )
    assert "tool_calls" not in none.json()["choices"][0]["message"]


@pytest.mark.parametrize(
    ("vendor", "tool_stream", "pieced"),
    [("kimi", False, True), ("glm", False, False), ("glm", True, True)],
)
def test_streamed_calls_in_each_vendors_shape(
    emulator: EmulatorServer, vendor: str, tool_stream: bool, pieced: bool
) -> None:
    emulator.script(
        {**STEP, "tool_calls": [{"name": "read_file", "arguments": {"path": "a/long/path.py"}}]}
    )
    extra = {"tool_stream": True} if tool_stream else {}
    model = "kimi-k2.6" if vendor == "kimi" else "glm-4.6"
    response = chat(emulator, vendor, body("x", model=model, tools=[READ], stream=True, **extra))

    pieces = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in events(response)
        if c["choices"][0]["delta"].get("tool_calls")
    ]
    assert pieces[0]["index"] == 0 and pieces[0]["function"]["name"] == "read_file"
    if pieced and vendor == "kimi":
        assert pieces[0]["id"] and pieces[0]["function"]["arguments"] == ""
        assert len(pieces) > 2 and all("id" not in p for p in pieces[1:])
    elif pieced:  # Z.ai's tool_stream: the tests in tests/emulators/test_glm_streams.py
        assert pieces[0]["id"] and pieces[0]["function"]["arguments"]
        assert len(pieces) > 2 and all(p["id"] == pieces[0]["id"] for p in pieces)
    else:
        assert len(pieces) == 1  # the whole call at once
    joined = "".join(p["function"].get("arguments", "") for p in pieces)
    assert json.loads(joined) == {"path": "a/long/path.py"}
    assert events(response)[-1]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    ("vendor", "request_body", "status", "error"),
    [
        (
            "kimi",
            body(model="kimi-k2.6", tools=[READ], tool_choice="required", thinking=None),
            400,
            {
                "message": "tool_choice 'required' is incompatible with thinking enabled",
                "type": "invalid_request_error",
            },
        ),
        (
            "kimi",
            body(
                model="kimi-k2.7-code",
                tools=[READ],
                tool_choice={"type": "function", "function": {"name": "read_file"}},
            ),
            400,
            {
                "message": "tool_choice 'specified' is incompatible with thinking enabled",
                "type": "invalid_request_error",
            },
        ),
        (
            "glm",
            body(model="glm-4.6", tools=[READ], tool_choice="required"),
            400,
            {"code": "1210", "message": "tool_choice only supports auto, not required"},
        ),
        (
            "glm",
            body(model="glm-4.6", stop=["a", "b"]),
            400,
            {"code": "1210", "message": "stop supports only one stop word"},
        ),
        (
            "kimi",
            body(model="kimi-k2.6", top_p=0.5),
            400,
            {
                "message": "Invalid request: invalid top_p: only 0.95 is allowed for this model",
                "type": "invalid_request_error",
            },
        ),
    ],
)
def test_what_the_emulated_vendors_refuse(
    emulator: EmulatorServer,
    vendor: str,
    request_body: dict[str, Any],
    status: int,
    error: dict[str, Any],
) -> None:
    response = chat(emulator, vendor, request_body)
    assert response.status_code == status and response.json() == {"error": error}


@pytest.mark.parametrize("vendor", ["kimi", "glm"])
def test_a_tool_result_that_answers_no_call_is_refused(
    emulator: EmulatorServer, vendor: str
) -> None:
    messages = [
        {"role": "user", "content": "x"},
        {"role": "tool", "tool_call_id": "call_nobody", "content": "42"},
    ]
    model = "kimi-k2.6" if vendor == "kimi" else "glm-4.5"
    response = chat(emulator, vendor, {"model": model, "messages": messages})
    assert response.status_code == 400 and "call_nobody" in str(response.json())
