"""The reasoning behind the tool calls exai hands to callers, kept to send back with them.

A thinking model's tool-calling turn has reasoning (``reasoning_content``) that
the vendor wants back when the caller returns that round: Moonshot refuses a
thinking request whose assistant tool-call message lacks it ("thinking is enabled
but reasoning_content is missing in assistant tool call message"), Z.ai asks for
it. No OpenAI client sends ``reasoning_content`` back, so exai keeps it itself:
when an answer ends in tool calls for the caller, :class:`ToolReasoning` keeps
that round's reasoning, and when a later request of the same caller carries the
round, the reasoning is put back on it before the request is sent.

A round is known by its owner and by the conversation up to and including it: a
digest over the owner's name and every message so far, each reduced to what a
client keeps of it (role, text, tool call ids, names and arguments, the id a tool
result answers). So one principal's tool-call ids never find another's reasoning
(the owner is hashed in first), and two conversations that happen to make the
same call (Moonshot's ids, ``functions.read_file:0``, repeat across
conversations) do not share reasoning either. Formatting a client may change
between requests (``content`` null or "", a list of text parts or one string,
keys it adds or drops) does not change the digest.

The cache lives in one daemon's memory, bounded in bytes (least recently used
first out) and in age. What it does not know (another daemon made the round, it
expired, the client made the round up) is settled by :func:`settle_reasoning`:
a model whose vendor refuses the round without reasoning, and whose thinking can
be switched off, gets thinking off for that request; otherwise the request is
refused naming the message. Every message always reaches the model; what was
adapted is reported as a note. The decision and its figures are in
docs/openai.md, "Thinking models and tool rounds".
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from exai.errors import ValidationError_
from exai.providers.base import ChatRequest
from exai.providers.catalogue import ModelInfo
from exai.providers.reasoning import ReplayRule

__all__ = ["ToolReasoning", "lacking_reasoning", "round_digests", "settle_reasoning"]

# Bytes an entry costs beyond its reasoning's UTF-8 (key, tuple, dict slot), measured
# by scripts/bench/tool_rounds.py with tracemalloc, rounded up.
ENTRY_OVERHEAD = 300


def _text(content: Any) -> Any:
    """Text content as one string (a list of text parts joined); other parts as JSON."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        return json.dumps(content, sort_keys=True, ensure_ascii=False)
    texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    if len(texts) == len(content):
        return "".join(texts)
    return [json.dumps(p, sort_keys=True, ensure_ascii=False) for p in content]


def _calls(message: dict[str, Any]) -> list[list[str]]:
    out = []
    for call in message.get("tool_calls") or []:
        call = call if isinstance(call, dict) else {}
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
        out.append([str(call.get("id", "")), str(function.get("name", "")), arguments])
    return out


def _unit(message: dict[str, Any]) -> bytes:
    """The message as a client keeps it, framed so that no two messages run together."""
    folded = [
        message.get("role"),
        _text(message.get("content")),
        _calls(message),
        message.get("tool_call_id") or "",
    ]
    data = json.dumps(folded, ensure_ascii=False, separators=(",", ":")).encode()
    return len(data).to_bytes(8, "big") + data


def _seed(owner: str) -> Any:
    return hashlib.sha256(b"exai-tool-reasoning\0" + owner.encode() + b"\0")


def round_digests(owner: str, messages: Sequence[dict[str, Any]]) -> dict[int, bytes]:
    """The key of every assistant tool-call message in ``messages``, by its index."""
    running = _seed(owner)
    keys: dict[int, bytes] = {}
    for index, message in enumerate(messages):
        running.update(_unit(message))
        if message.get("role") == "assistant" and message.get("tool_calls"):
            keys[index] = running.copy().digest()
    return keys


def _reasoning(message: dict[str, Any]) -> str:
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


@dataclass(slots=True)
class _Stats:
    kept: int = 0
    hits: int = 0
    misses: int = 0
    evicted: int = 0


class ToolReasoning:
    """Reasoning of tool rounds by (owner, conversation so far); bounded and aging.

    Used from the event loop only; nothing here awaits.
    """

    def __init__(
        self, max_bytes: int, ttl_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[str, float, int]] = OrderedDict()
        self._bytes = 0
        self.stats = _Stats()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def remember(
        self, owner: str, messages: Sequence[dict[str, Any]], turn: dict[str, Any]
    ) -> None:
        """Keep ``turn``'s reasoning (an assistant tool-call message exai returned)
        for the conversation ``messages`` it answered. A round without reasoning
        is kept too, so that it is known to have none."""
        if not turn.get("tool_calls") or self.max_bytes <= 0:
            return
        reasoning = _reasoning(turn)
        running = _seed(owner)
        for message in messages:
            running.update(_unit(message))
        running.update(_unit(turn))
        key = running.digest()
        size = len(reasoning.encode()) + ENTRY_OVERHEAD
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old[2]
        self._entries[key] = (reasoning, self._clock() + self.ttl_s, size)
        self._bytes += size
        self.stats.kept += 1
        while self._bytes > self.max_bytes and self._entries:
            _, (_, _, gone) = self._entries.popitem(last=False)
            self._bytes -= gone
            self.stats.evicted += 1

    def restore(
        self, owner: str, messages: Sequence[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[int]]:
        """``messages`` with the reasoning this cache knows put back on tool-call
        messages that lack it, and the indices of the rounds it does not know
        (a round it knows to have had no reasoning is not among them). The input
        is not modified."""
        out = list(messages)
        unknown: list[int] = []
        now = self._clock()
        for index, key in round_digests(owner, messages).items():
            if _reasoning(messages[index]):
                continue
            entry = self._entries.get(key)
            if entry is not None and entry[1] <= now:
                del self._entries[key]
                self._bytes -= entry[2]
                entry = None
            if entry is None:
                self.stats.misses += 1
                unknown.append(index)
                continue
            self._entries.move_to_end(key)
            self.stats.hits += 1
            if entry[0]:
                out[index] = {**messages[index], "reasoning_content": entry[0]}
        return out, unknown


def lacking_reasoning(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Indices of assistant tool-call messages that carry no reasoning."""
    return [
        i
        for i, m in enumerate(messages)
        if m.get("role") == "assistant" and m.get("tool_calls") and not _reasoning(m)
    ]


def settle_reasoning(
    info: ModelInfo,
    request: ChatRequest,
    asked_thinking: bool | None,
    rule_for: Callable[[ChatRequest], ReplayRule],
    cache: ToolReasoning | None,
) -> tuple[ChatRequest, list[dict[str, str]]]:
    """The caller's messages with their tool rounds' reasoning put back where it is
    known, and the request adapted (or refused) for the rounds where it is not.

    ``request`` is already fitted to ``info``; ``asked_thinking`` is the caller's
    own switch (None: the model's default); ``rule_for`` is the vendor's
    :class:`ReplayRule` for a request.
    """
    messages = request.messages
    unknown = lacking_reasoning(messages)
    if cache is not None and request.owner is not None:
        messages, unknown = cache.restore(request.owner, messages)
    request.messages = messages
    lacking = lacking_reasoning(messages)
    if not lacking:
        return request, []
    rule = rule_for(request)
    if rule.requires_tool_reasoning:
        where = ", ".join(f"messages[{i}]" for i in lacking)
        why = (
            "not known to this daemon (made elsewhere, expired, or not made by exai)"
            if unknown
            else "empty (the round was made without thinking)"
        )
        if info.thinking == "switchable" and asked_thinking is not True:
            request.thinking, request.thinks = False, False
            message = (
                f"the reasoning of the tool round in {where} is {why}, and {info.name} "
                "refuses a tool round without reasoning while it thinks; thinking was "
                "turned off for this request"
            )
            return request, [{"param": "thinking", "message": message}]
        raise ValidationError_(
            f"{where}: {info.name} refuses an assistant tool-call message without its "
            f"reasoning while it thinks, and that reasoning is {why}; send "
            "reasoning_content with it, turn thinking off, or choose a model whose thinking "
            "can be turned off",
            details={"param": f"messages[{lacking[0]}]", "messages": lacking},
        )
    if rule.tool_reasoning and unknown:
        where = ", ".join(f"messages[{i}]" for i in unknown)
        message = (
            f"the reasoning of the tool round in {where} is not known to this daemon; "
            "the round was sent without it"
        )
        return request, [{"param": f"messages[{unknown[0]}]", "message": message}]
    return request, []
