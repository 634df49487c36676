"""Agent sessions for the console's tests, made as agents make them: the real
``anthropic`` and ``openai`` SDKs against a daemon's model faces, each request
carrying the whole history, with one tool round. The provider emulator plays
the model (see :func:`script_tool_round`)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
from openai import AsyncOpenAI

from exai.app import App
from tests.web.faces import agent_turn

__all__ = [
    "READ",
    "anthropic_session",
    "openai_session",
    "script_tool_round",
    "settle",
]

READ = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the project",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                    "note": {"type": "string"}},
                   "required": ["path"]}}}  # fmt: skip


def script_tool_round(emulator: Any, arguments: dict[str, Any], answer: str) -> None:
    """The emulated model calls ``read_file`` with ``arguments`` when it is offered and
    the last message is the user's, then answers ``answer`` once the result is back
    (``{last_tool_result}`` in it is the result's text); plain replies after that."""
    emulator.script(
        {"tool_calls": [{"name": "read_file", "arguments": arguments}],
         "when": {"offers_tool": "read_file", "last_role": "user"}},
        {"text": answer, "when": {"last_role": "tool"}},
        *[{"text": "noted", "when": {"last_role": "user"}}] * 4,
    )  # fmt: skip


async def anthropic_session(
    base: str, token: str, prompt: str, result: str, *, ref: str | None = None
) -> list[dict[str, Any]]:
    """One user turn of an agent on ``/v1/messages`` (as Claude Code: its session id in
    ``metadata.user_id``): ask, return ``result`` for each tool call, ask again.
    Returns the history the agent holds afterwards."""
    client = anthropic.AsyncAnthropic(base_url=base, api_key=token, max_retries=0)
    tool = {"name": "read_file", "description": READ["function"]["description"],
            "input_schema": READ["function"]["parameters"]}  # fmt: skip
    ask: dict[str, Any] = {"model": "kimi-k2.6", "max_tokens": 1000, "tools": [tool]}
    if ref is not None:
        ask["metadata"] = {"user_id": json.dumps({"device_id": "d", "session_id": ref})}
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    try:
        while True:
            reply = await client.messages.create(messages=messages, **ask)
            messages.append(
                {"role": "assistant", "content": [b.model_dump() for b in reply.content]}
            )
            calls = [b for b in reply.content if b.type == "tool_use"]
            if not calls:
                return messages
            results = [{"type": "tool_result", "tool_use_id": c.id, "content": result}
                       for c in calls]  # fmt: skip
            messages.append({"role": "user", "content": results})
    finally:
        await client.close()


async def openai_session(
    base: str, token: str, messages: list[dict[str, Any]], result: str
) -> list[dict[str, Any]]:
    """One user turn of an agent on ``/v1/chat/completions``: ask, return ``result`` for
    each tool call, ask again until answered. Returns the history afterwards."""
    async with AsyncOpenAI(base_url=f"{base}/v1", api_key=token, max_retries=0) as client:
        return await agent_turn(client, messages, result, [READ])


async def settle(daemon: App) -> None:
    """Wait until the sessions' turns and the calls' cost rows are written."""
    await daemon.services.sessions.settled()
    await daemon.services.ledger.flush()
