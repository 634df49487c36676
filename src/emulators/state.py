"""What the provider emulator is told and what it has seen: scripts, configuration, requests.

Part of the provider emulator (a TEST FIXTURE). A test scripts responses
(:class:`Scripted`), each consumed by one request; a scripted response may say
which requests take it (``when``), because real agents send side requests
(titles, summaries, a small fast model) between the steps of a conversation and
those must not consume the step's script. Conditions, all of which must hold:

- ``offers_tool``: the request offers a function tool of that name;
- ``last_role``: the request's last message has that role (``"tool"``: it returns
  a tool result);
- ``model``: the request is for that model.

A scripted response may carry ``tool_calls`` (``[{"name": ..., "arguments":
{...}}]``; the ids are made by the emulator, the same for the same request) and
text that quotes the request's last tool result (``"{last_tool_result}"``).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from exai.emulators.files import EmulatedFiles
from exai.emulators.prompt_cache import PromptCache
from exai.emulators.replies import message_text
from exai.emulators.vendor_wire import ERROR_KINDS, Vendor

__all__ = ["EmulatorConfig", "EmulatorState", "Scripted", "marker"]

_MARKER_RE = re.compile(r"\[emulate:([^\]]*)\]")
_CONDITIONS = frozenset({"offers_tool", "last_role", "model"})


@dataclass
class Scripted:
    """How to answer one request. Unset fields fall back to the emulated model."""

    vendor: Vendor | None = None  # only a request to this vendor consumes it
    when: dict[str, str] | None = None  # only a request meeting these conditions does
    status: int = 200
    error: str | None = None  # an ERROR_KINDS name; default: the usual one for ``status``
    body: dict[str, Any] | None = None  # a raw error body instead of the vendor's
    retry_after: float | None = None  # Retry-After header, seconds
    retry_after_ms: int | None = None  # retry-after-ms header
    latency_ms: float | None = None
    text: str | None = None  # may quote the request's last tool result: {last_tool_result}
    reasoning: str | None = None
    finish_reason: str | None = None  # GLM "sensitive"/"network_error" also cut the text
    fail_after_chunks: int | None = None  # streams only: an error event after N chunks
    tool_calls: list[dict[str, Any]] | None = None  # [{"name": ..., "arguments": {...}}]

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Scripted:
        known = {f.name for f in fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"unknown script fields {sorted(unknown)}; known: {sorted(known)}")
        item = cls(**raw)
        if item.error is not None and item.error not in ERROR_KINDS:
            raise ValueError(f"unknown error {item.error!r}; known: {sorted(ERROR_KINDS)}")
        if item.when is not None:
            if not isinstance(item.when, dict) or set(item.when) - _CONDITIONS:
                raise ValueError(f"when: conditions are {sorted(_CONDITIONS)}")
        for call in item.tool_calls or []:
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ValueError('tool_calls: each needs a "name" (and "arguments")')
            if set(call) - {"name", "arguments"}:
                raise ValueError('tool_calls: each takes "name" and "arguments" only')
        return item

    def applies_to(self, vendor: Vendor, body: dict[str, Any]) -> bool:
        if self.vendor not in (None, vendor):
            return False
        when = self.when or {}
        if "model" in when and body.get("model") != when["model"]:
            return False
        messages = body.get("messages") or []
        if "last_role" in when and (not messages or messages[-1].get("role") != when["last_role"]):
            return False
        if "offers_tool" in when:
            names = {
                t.get("function", {}).get("name")
                for t in body.get("tools") or []
                if isinstance(t, dict) and t.get("type") == "function"
            }
            if when["offers_tool"] not in names:
                return False
        return True


@dataclass
class EmulatorConfig:
    latency_ms: float = 0.0
    chunk_delay_ms: float = 0.0
    # Longer prompts get the context-length error (Moonshot: HTTP 400; Z.ai: a 200
    # with finish_reason "model_context_window_exceeded").
    max_prompt_tokens: int | None = None
    embeddings_status: int = 200  # e.g. 429: every embeddings request gets that error
    embeddings_retry_after: float | None = None  # its Retry-After, seconds
    api_key: str | None = None  # when set, any other key gets the vendor's 401
    prompt_cache: bool = True  # report prefixes seen before as cached prompt tokens
    # Z.ai tool_stream: repeat function.name on every argument piece (3p vllm#44098)
    glm_tool_stream_repeat_name: bool = False
    models: list[str] = field(  # what GET /v1/models lists: Moonshot's current chat models
        default_factory=lambda: [
            "kimi-k3",
            "kimi-k2.7-code",
            "kimi-k2.7-code-highspeed",
            "kimi-k2.6",
        ]
    )

    def update(self, raw: dict[str, Any]) -> None:
        known = {f.name for f in fields(self)}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"unknown config fields {sorted(unknown)}; known: {sorted(known)}")
        for key, value in raw.items():
            setattr(self, key, value)


class EmulatorState:
    """Script, configuration and request log; shared between the server's thread
    and the test's, hence the lock."""

    def __init__(self, config: EmulatorConfig | None = None) -> None:
        self.config = config or EmulatorConfig()
        self._initial = asdict(self.config)
        self._lock = threading.Lock()
        self._script: list[Scripted] = []
        self._requests: list[dict[str, Any]] = []
        self.prompt_cache = PromptCache()
        self.files = EmulatedFiles()

    def script(self, items: Iterable[Scripted | dict[str, Any]]) -> None:
        parsed = [i if isinstance(i, Scripted) else Scripted.parse(i) for i in items]
        with self._lock:
            self._script.extend(parsed)

    def next_scripted(self, vendor: Vendor, body: dict[str, Any] | None = None) -> Scripted | None:
        """The first scripted response this request takes, removed from the script."""
        with self._lock:
            for index, item in enumerate(self._script):
                if item.applies_to(vendor, body or {}):
                    return self._script.pop(index)
        return None

    def record(self, entry: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            entry["seq"] = len(self._requests) + 1
            self._requests.append(entry)
        return entry

    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._requests]

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self.config = EmulatorConfig(**self._initial)
        self.prompt_cache.clear()
        self.files.reset()


def marker(body: dict[str, Any]) -> Scripted | None:
    """The ``[emulate:...]`` marker in the last user message, as a scripted response."""
    messages = body.get("messages") or []
    users = [m for m in messages if m.get("role") == "user"]
    match = _MARKER_RE.search(message_text(users[-1])) if users else None
    if match is None:
        return None
    raw: dict[str, Any] = {}
    for pair in filter(None, (p.strip() for p in match.group(1).split(","))):
        key, _, value = pair.partition("=")
        try:
            raw[key.strip()] = json.loads(value)
        except ValueError:
            raw[key.strip()] = value.strip()
    return Scripted.parse(raw)
