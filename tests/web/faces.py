"""What the model-face tests share: a daemon with two principals on the provider
emulator, and the tools an agent offers its model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from exai.app import App
from exai.emulators.provider import EmulatorServer
from exai.settings import Settings
from tests.conftest import emulated_providers, make_settings, running_daemon

__all__ = [
    "BASH",
    "READ",
    "TOKENS",
    "agent_turn",
    "base_url",
    "faces_daemon",
    "faces_settings",
    "last_sent",
    "sent_bodies",
]

TOKENS = {"alice": "tok-alice-0123456789", "bob": "tok-bob-0123456789"}
READ = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the project",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}  # fmt: skip
BASH = {"type": "function", "function": {
    "name": "bash", "description": "Run a shell command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}  # fmt: skip


def faces_settings(tmp_path: Path, emulator: EmulatorServer, **overrides: Any) -> Settings:
    tokens = ",".join(f"{name}={token}" for name, token in TOKENS.items())
    return make_settings(tmp_path, ws_tokens=tokens, stream_min_chunk_chars=1,
                         **{**emulated_providers(emulator), **overrides})  # fmt: skip


@asynccontextmanager
async def faces_daemon(
    tmp_path: Path, emulator: EmulatorServer, **overrides: Any
) -> AsyncIterator[App]:
    async with running_daemon(faces_settings(tmp_path, emulator, **overrides)) as daemon:
        yield daemon


def base_url(daemon: App, suffix: str = "/v1") -> str:
    assert daemon.web is not None
    return f"http://127.0.0.1:{daemon.web.port}{suffix}"


def sent_bodies(emulator: EmulatorServer) -> list[dict[str, Any]]:
    """The bodies of the requests the emulator received, oldest first."""
    return [r["body"] for r in emulator.requests]


def last_sent(emulator: EmulatorServer) -> dict[str, Any]:
    return sent_bodies(emulator)[-1]


async def agent_turn(
    client: Any, messages: list[dict[str, Any]], result: str, tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One user turn of an agent on ``/v1/chat/completions`` (``client`` an
    ``AsyncOpenAI``): ask, answer each tool call with ``result``, ask again until
    answered. Returns the history afterwards, as the agent keeps it."""
    while True:
        reply = await client.chat.completions.create(model="kimi-k2.6", messages=messages,
                                                     tools=tools)  # fmt: skip
        message = reply.choices[0].message
        messages = [*messages, message.model_dump(exclude_none=True)]
        if not message.tool_calls:
            return messages
        messages += [{"role": "tool", "tool_call_id": c.id, "content": result}
                     for c in message.tool_calls]  # fmt: skip
