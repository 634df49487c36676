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

An agent's request repeats the one before it and adds an answer and a message or
two, so hashing every request whole makes a session's cost grow with the square of
its length (2.7 to 6.2 ms a request at 400 messages). :class:`BoundaryCache` keeps
the last requests' digests per principal and hashes only what a request adds to
one of them: comparing a repeated message with the one kept costs a fraction of
hashing it.
"""

from __future__ import annotations

import collections
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["BoundaryCache", "answer_digest", "boundaries", "input_digest", "items"]


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


_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _chain(digest: bytes, item: tuple[Any, ...]) -> bytes:
    return hashlib.sha256(digest + _ENCODER.encode(item).encode()).digest()


def _start(owner: str) -> bytes:
    return hashlib.sha256(b"exai.session\0" + owner.encode()).digest()


def boundaries(
    owner: str, messages: Sequence[Mapping[str, Any]], known: Sequence[str] = ()
) -> list[str]:
    """The digest of the conversation before each message and after the last:
    ``len(messages) + 1`` digests, hex. Two boundaries with no item between them
    (a system message) have the same digest. ``known`` is the start of the answer
    when it is known already (the boundaries of a prefix of ``messages``)."""
    out = list(known) or [_start(owner).hex()]
    digest = bytes.fromhex(out[-1])
    for message in messages[len(out) - 1 :]:
        for item in items(message):
            digest = _chain(digest, item)
        out.append(digest.hex())
    return out


def _size(message: Mapping[str, Any]) -> int:
    """About what keeping ``message`` holds in memory, in characters (its text's)."""
    content = message.get("content")
    if isinstance(content, str):
        return len(content) + 64
    parts = content if isinstance(content, list) else ()
    return 64 + sum(len(p.get("text") or "") for p in parts if isinstance(p, Mapping))


class BoundaryCache:
    """The boundaries of the last ``per_owner`` requests of each principal, for the
    requests that repeat them (see the module's docstring).

    A request's messages are compared with a kept request's, and the longest kept
    request it starts with gives the digests of its start: exact, since equal
    messages have equal items. What is kept is bounded in characters of message
    text (``max_chars``, the least recently used principal's requests let go
    first): the cache holds references to requests' messages, which would
    otherwise be let go once kept. Used by one thread at a time.
    """

    def __init__(self, max_chars: int = 32_000_000, per_owner: int = 4) -> None:
        self._max_chars, self._per_owner = max_chars, per_owner
        self._owners: collections.OrderedDict[
            str, collections.deque[tuple[list[Mapping[str, Any]], list[str], int]]
        ] = collections.OrderedDict()
        self._chars = 0
        self.hits = self.misses = 0

    def boundaries(self, owner: str, messages: Sequence[Mapping[str, Any]]) -> list[str]:
        kept = self._owners.get(owner)
        start: list[str] = []
        size = 0
        for seen, digests, seen_size in kept or ():
            n = len(seen)
            if len(start) <= n <= len(messages) and list(messages[:n]) == seen:
                start, size = digests[: n + 1], seen_size
        if start:
            self.hits += 1
        else:
            self.misses += 1
        out = boundaries(owner, messages, start)
        size += sum(map(_size, messages[len(start) - 1 if start else 0 :]))
        self._keep(owner, messages, out, size)
        return out

    def _keep(
        self, owner: str, messages: Sequence[Mapping[str, Any]], digests: list[str], size: int
    ) -> None:
        if size > self._max_chars // 4:  # one request the cache would mostly be
            return
        kept = self._owners.setdefault(owner, collections.deque())
        self._owners.move_to_end(owner)
        kept.append((list(messages), digests, size))
        self._chars += size
        if len(kept) > self._per_owner:
            self._chars -= kept.popleft()[2]
        while self._chars > self._max_chars:
            _, oldest = self._owners.popitem(last=False)
            self._chars -= sum(entry[2] for entry in oldest)


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
