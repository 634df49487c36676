"""The Anthropic Messages API at ``/v1/messages``, driven by the real ``anthropic`` SDK
through a real daemon against the provider emulator, scripted to call tools.

(Claude Code itself runs in tests/clients/test_agents.py.)"""

from __future__ import annotations

import asyncio
import json

import anthropic
import httpx
import pytest

from exai.web.anthropic_blocks import outgoing_id
from exai.web.reasoning_seal import face_seal
from tests.web.faces import TOKENS, base_url, faces_daemon, last_sent

READ = {
    "name": "read_file",
    "description": "Read a file of the project",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
STEP = {
    "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}],
    "reasoning": "the notes will say",
    "when": {"offers_tool": "read_file", "last_role": "user"},
}
ANSWER = {"text": "It says: {last_tool_result}", "when": {"last_role": "tool"}}
ASK = [{"role": "user", "content": "what does notes.txt say?"}]


def _client(daemon, principal: str = "alice", **kw) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=base_url(daemon, ""), api_key=TOKENS[principal], max_retries=0, **kw
    )


async def test_a_tool_round_whole_then_streamed_with_claude_model_names(tmp_path, emulator):
    emulator.script(STEP, ANSWER)
    async with faces_daemon(tmp_path, emulator, anthropic_models="claude-*=kimi-k2.6") as d:
        async with _client(d) as client:
            first = await client.messages.create(
                model="claude-sonnet-5",
                max_tokens=1024,
                system="You are a coding agent.",
                messages=ASK,
                tools=[READ],
            )
            assert first.stop_reason == "tool_use" and first.model == "claude-sonnet-5"
            thinking, use = first.content
            assert thinking.type == "thinking" and thinking.thinking == "the notes will say"
            assert use.type == "tool_use" and use.name == "read_file"
            assert use.input == {"path": "notes.txt"}
            history = [
                *ASK,
                {"role": "assistant", "content": [b.model_dump() for b in first.content]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": use.id, "content": "pelican"}
                    ],
                },
            ]
            async with client.messages.stream(
                model="claude-sonnet-5", max_tokens=1024, messages=history, tools=[READ]
            ) as stream:
                kinds = [event.type async for event in stream]
                final = await stream.get_final_message()
    (text,) = [block.text for block in final.content if block.type == "text"]
    assert text == "It says: pelican" and final.stop_reason == "end_turn"
    assert kinds[0] == "message_start" and "text" in kinds and kinds[-1] == "message_stop"
    sent = last_sent(emulator)
    assert sent["model"] == "kimi-k2.6"
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]
    assert sent["messages"][1]["reasoning_content"] == "the notes will say"
    assert sent["messages"][2] == {
        "role": "tool",
        "tool_call_id": sent["messages"][1]["tool_calls"][0]["id"],
        "content": "pelican",
    }


async def test_a_streamed_tool_call_arrives_as_input_json_deltas(tmp_path, emulator):
    emulator.script(STEP)
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        async with client.messages.stream(
            model="glm-4.6",
            max_tokens=512,
            messages=ASK,
            tools=[READ],
            thinking={"type": "enabled", "budget_tokens": 1024},
        ) as stream:
            events = [event async for event in stream]
            final = await stream.get_final_message()
        seal = face_seal(daemon.settings)  # the daemon's own key, in its data directory
    raw = [
        e
        for e in events
        if e.type
        in (
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        )
    ]
    deltas = [e.delta.type for e in raw if e.type == "content_block_delta"]
    assert "thinking_delta" in deltas and "signature_delta" in deltas
    assert "input_json_delta" in deltas
    thinking, use = final.content
    assert seal.open(thinking.signature, "alice").text == "the notes will say"
    assert "the notes will say" not in thinking.signature  # sealed, not encoded
    assert seal.open(thinking.signature, "bob").text == ""  # alice's alone
    assert use.input == {"path": "notes.txt"} and final.stop_reason == "tool_use"
    assert use.id == outgoing_id(use.id) or use.id.startswith("toolu_x")
    assert any(n["param"] == "thinking.budget_tokens" for n in raw[-2].model_extra["exai"]["notes"])


async def test_both_key_headers_authenticate_and_errors_have_anthropics_shape(tmp_path, emulator):
    async with faces_daemon(tmp_path, emulator) as daemon:
        url = base_url(daemon, "")
        async with anthropic.AsyncAnthropic(
            base_url=url, auth_token=TOKENS["bob"], api_key=None, max_retries=0
        ) as bearer:
            ok = await bearer.messages.create(model="kimi-k2.6", max_tokens=64, messages=ASK)
            assert [block.type for block in ok.content] == ["thinking", "text"]
        async with _client(daemon) as client:
            with pytest.raises(anthropic.BadRequestError) as bad:
                await client.messages.create(
                    model="kimi-k2.6", max_tokens=64, messages=ASK, extra_body={"top_k": 5}
                )
            with pytest.raises(anthropic.NotFoundError):
                await client.messages.create(model="gpt-17-ultra", max_tokens=64, messages=ASK)
        async with anthropic.AsyncAnthropic(
            base_url=url, api_key="wrong", max_retries=0
        ) as bad_key:
            with pytest.raises(anthropic.AuthenticationError) as denied:
                await bad_key.messages.create(model="kimi-k2.6", max_tokens=64, messages=ASK)
    assert bad.value.body["error"]["type"] == "invalid_request_error"
    assert bad.value.body["error"]["message"].startswith("top_k: ")
    assert denied.value.body["type"] == "error"
    assert denied.value.body["error"]["type"] == "authentication_error"
    assert len(emulator.requests) == 1  # only the good request reached a provider


async def test_count_tokens_answers_without_calling_the_model(tmp_path, emulator):
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        counted = await client.messages.count_tokens(
            model="claude-haiku-4-5", messages=ASK, tools=[READ]
        )
        bigger = await client.messages.count_tokens(
            model="claude-haiku-4-5", messages=[{"role": "user", "content": "word " * 500}]
        )
    assert 0 < counted.input_tokens < bigger.input_tokens
    assert emulator.requests == []


async def test_a_client_that_leaves_mid_stream_cancels_the_call(tmp_path, emulator):
    emulator.script({"text": "slow " * 200})
    emulator.configure(chunk_delay_ms=50)
    body = {"model": "kimi-k2.6", "max_tokens": 4000, "stream": True, "messages": ASK}
    async with faces_daemon(tmp_path, emulator) as daemon:
        headers = {"x-api-key": TOKENS["alice"], "anthropic-version": "2023-06-01"}
        async with (
            httpx.AsyncClient(base_url=base_url(daemon), headers=headers) as http,
            http.stream("POST", "/messages", json=body) as response,
        ):
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if "text_delta" in line:
                    break
        for _ in range(200):
            if not daemon.core.dispatcher.running:
                break
            await asyncio.sleep(0.05)
        metrics = daemon.core.metrics.render().decode()
    assert 'exai_calls_total{status="CANCELLED",tool="completion"} 1.0' in metrics
    # One streamed provider request for the question, not retried once the client left.
    (sent,) = emulator.requests
    assert sent["body"]["stream"] is True and sent["body"]["messages"][-1] == ASK[-1]


async def test_a_spent_budget_is_refused_before_any_provider_request(tmp_path, emulator):
    budget = {"budgets": "alice=0.000001 USD/day"}  # less than any prompt costs
    async with faces_daemon(tmp_path, emulator, **budget) as daemon, _client(daemon) as client:
        with pytest.raises(anthropic.APIStatusError) as caught:
            await client.messages.create(model="kimi-k2.6", max_tokens=64, messages=ASK)
    assert caught.value.status_code == 402
    assert caught.value.body["error"]["type"] == "billing_error"
    assert caught.value.body["exai"]["code"] == "BUDGET_EXCEEDED"
    assert emulator.requests == []


async def test_each_request_is_audited_with_what_the_face_knows(tmp_path, emulator):
    sink = tmp_path / "audit.jsonl"
    audit = {
        "audit_enabled": True,
        "audit_sink": "jsonl",
        "audit_jsonl_path": sink,
        "audit_ship_interval_s": 0.1,
    }
    async with faces_daemon(tmp_path, emulator, **audit) as daemon, _client(daemon) as client:
        await client.messages.create(
            model="claude-haiku-4-5", max_tokens=64, messages=ASK, metadata={"user_id": "user-42"}
        )
    events = [json.loads(line) for line in sink.read_text().splitlines()]
    (face,) = [e for e in events if e["kind"] == "model_request"]
    assert face["face"] == "anthropic" and face["model_asked"] == "claude-haiku-4-5"
    assert face["client_ref"] == "user-42" and face["principal"] == "alice"
    finished = [
        e for e in events if e["kind"] == "call_finished" and e["request_id"] == face["request_id"]
    ]
    assert finished and finished[0]["tool"] == "completion" and finished[0]["status"] == "ok"


async def test_a_quiet_model_gets_pings_before_its_first_word(tmp_path, emulator):
    emulator.configure(latency_ms=700)
    body = {"model": "kimi-k2.6", "max_tokens": 64, "stream": True, "messages": ASK}
    async with faces_daemon(tmp_path, emulator, faces_ping_s=0.2) as daemon:
        headers = {"x-api-key": TOKENS["alice"], "anthropic-version": "2023-06-01"}
        async with httpx.AsyncClient(base_url=base_url(daemon), headers=headers) as http:
            response = await http.post("/messages", json=body, timeout=30)
    names = [
        line.removeprefix("event: ")
        for line in response.text.splitlines()
        if line.startswith("event: ")
    ]
    assert response.status_code == 200 and names[0] == "message_start"
    first_block = names.index("content_block_start")
    assert names[1] == "ping" and set(names[1:first_block]) == {"ping"}
    assert names[-1] == "message_stop"
