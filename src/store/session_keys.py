"""What makes one model-face request the continuation of another: a chain of digests.

Agents on the model faces send their whole history with every request. A request
*continues* a stored agent session when the conversation it sends, up to some
point, is what an earlier request sent and was answered, tool calls and results
included. Each face rebuilds the agent's echo of an answer in its own way (an
Anthropic ``tool_use`` input re-serialized, an assistant turn split into a
message per Responses item, a thinking block's reasoning brought back or not), so
the comparison is made on what the conversation *says*, not on its bytes:

- a message becomes *items*: a user's text (or image); an assistant's text, then
  one item per tool call (its id, name and arguments as parsed JSON); a tool
  result (the call it answers and its text). System messages are not items: an
  agent's system prompt may change within a session (a date, a directory listing)
  without the conversation being another one.
- text is compared stripped of surrounding whitespace, list-valued content as
  its parts' text joined, and reasoning not at all (agents that drop it continue
  the same conversation).

The digest after ``n`` items chains the digest after ``n - 1`` with item ``n``,
starting from the principal's name, so one principal's digests never match
another's. :func:`boundaries` gives the digest at every message boundary of a
request, which is what a stored session's *head* (its digest after an answer) is
looked up against. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["answer_digest", "boundaries", "input_digest", "items"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, Mapping)]
        return "".join(p for p in parts if isinstance(p, str)).strip()
    return ""


def _images(content: Any) -> list[str]:
    if not isinstance(content, list):
        return []
    found = []
    for part in content:
        if isinstance(part, Mapping) and part.get("type") == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, Mapping) else url
            found.append(hashlib.sha256(str(url).encode()).hexdigest())
    return found


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw.strip()
    return raw


def items(message: Mapping[str, Any]) -> Iterator[tuple[Any, ...]]:
    """What one message says, as the items a session is compared on."""
    role, content = message.get("role"), message.get("content")
    if role == "user":
        text = _text(content)
        if text:
            yield ("user", text)
        for image in _images(content):
            yield ("image", image)
    elif role == "assistant":
        text = _text(content)
        if text:
            yield ("assistant", text)
        for call in message.get("tool_calls") or ():
            if not isinstance(call, Mapping):
                continue
            function = call.get("function")
            if not isinstance(function, Mapping):
                function = {}
            yield ("call", str(call.get("id")), str(function.get("name")),
                   _arguments(function.get("arguments")))  # fmt: skip
    elif role == "tool":
        yield ("result", str(message.get("tool_call_id")), _text(content))


def _chain(digest: bytes, item: tuple[Any, ...]) -> bytes:
    encoded = json.dumps(item, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(digest + encoded.encode()).digest()


def _start(owner: str) -> bytes:
    return hashlib.sha256(b"exai.session\0" + owner.encode()).digest()


def boundaries(owner: str, messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The digest of the conversation before each message and after the last:
    ``len(messages) + 1`` digests, hex. Two boundaries with no item between them
    (a system message) have the same digest."""
    digest = _start(owner)
    out = [digest.hex()]
    for message in messages:
        for item in items(message):
            digest = _chain(digest, item)
        out.append(digest.hex())
    return out


def input_digest(boundary: str) -> str:
    """The key of a request's whole input (the digest after its last message), apart
    from every answered head: a retry of the same input finds the turn it stored."""
    return hashlib.sha256(b"input\0" + bytes.fromhex(boundary)).hexdigest()


def answer_digest(boundary: str, answer: Mapping[str, Any]) -> str:
    """The head after ``answer``, which followed the input whose digest is ``boundary``."""
    digest = bytes.fromhex(boundary)
    for item in items(answer):
        digest = _chain(digest, item)
    return digest.hex()
