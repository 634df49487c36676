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

The cache lives in the daemon's memory, bounded in age and in bytes per
principal (least recently used first out, each principal on a shelf of its own,
so one heavy user never evicts another's rounds) and in all. With a store, it
lives there too (:mod:`exai.store.reasoning`): every round kept is queued and
written in the background, never on the call path, and a request carrying rounds
memory does not hold reads them in one query (:meth:`ToolReasoning.recall`), so a
round made on another daemon behind the same Postgres, or before a restart, is
found. What it still does not know (expired, evicted, written by no daemon, made
up by the client) is settled by :func:`settle_reasoning`:
a model whose vendor refuses the round without reasoning, and whose thinking can
be switched off, gets thinking off for that request; otherwise the request is
refused naming the message. Every message always reaches the model; what was
adapted is reported as a note. The decision and its figures are in
docs/openai.md, "Thinking models and tool rounds".
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from exai.logs import get_logger
from exai.port import KeptReasoning
from exai.providers.reasoning import lacking_reasoning, reasoning_of

__all__ = [
    "KeptReasoning",
    "Load",
    "ToolReasoning",
    "round_digests",
]

log = get_logger("exai.providers")

# Bytes an entry costs beyond its reasoning's UTF-8 (key, tuple, dict slot), measured
# by scripts/bench/tool_rounds.py with tracemalloc, rounded up.
ENTRY_OVERHEAD = 300
# How long to wait before asking the store again for a round answered on another
# daemon a moment ago (its writer starts at once; this covers a busy loop or database).
RECHECK_S = 0.2
# A read for rounds memory lacks that takes longer leaves them unknown.
LOAD_TIMEOUT_S = 2.0


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


# Reads the store's entries of an owner among the given keys (one query).
Load = Callable[[str, Sequence[bytes]], Awaitable[Sequence[KeptReasoning]]]


@dataclass(slots=True)
class _Stats:
    kept: int = 0
    hits: int = 0
    misses: int = 0
    evicted: int = 0
    loads: int = 0  # reads of the store for rounds memory did not hold
    loaded: int = 0  # rounds those reads found
    load_failures: int = 0
    dropped: int = 0  # rounds never written: the store was unreachable too long


@dataclass(slots=True)
class _Shelf:
    """One principal's entries, least recently used first."""

    entries: OrderedDict[bytes, tuple[str, float, int]] = field(default_factory=OrderedDict)
    size: int = 0


class ToolReasoning:
    """Reasoning of tool rounds by (owner, conversation so far); bounded and aging.

    Each principal has a shelf of its own, bounded by ``principal_bytes`` (least
    recently used first out), so one principal's volume never evicts another's
    rounds; all shelves together are bounded by ``max_bytes``, beyond which the
    largest shelf gives up its oldest entry.

    Once :meth:`share` has given it the store's reader, every round kept here is
    also queued for the store (:meth:`take_pending`, written in the background by
    :class:`exai.cluster.reasoning.SharedReasoning`), and :meth:`recall` reads the
    rounds a request carries that memory does not hold. Nothing else awaits.
    """

    def __init__(
        self,
        max_bytes: int,
        ttl_s: float,
        clock: Callable[[], float] = time.time,
        *,
        principal_bytes: int | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self.principal_bytes = min(max_bytes, principal_bytes or max_bytes)
        self.ttl_s = ttl_s
        self._clock = clock
        self._shelves: dict[str, _Shelf] = {}
        self._bytes = 0
        self._count = 0
        self._load: Load | None = None
        self._wake: Callable[[], None] = lambda: None
        self._pending: list[KeptReasoning] = []
        self._pending_bytes = 0
        self.stats = _Stats()

    def __len__(self) -> int:
        return self._count

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def held_by(self, owner: str) -> int:
        """Bytes of ``owner``'s rounds in memory."""
        shelf = self._shelves.get(owner)
        return shelf.size if shelf is not None else 0

    # --- memory ------------------------------------------------------------------

    def _put(self, owner: str, key: bytes, reasoning: str, expires_at: float, size: int) -> None:
        shelf = self._shelves.get(owner)
        if shelf is None:
            shelf = self._shelves[owner] = _Shelf()
        old = shelf.entries.pop(key, None)
        if old is not None:
            self._forgot(shelf, old[2])
        shelf.entries[key] = (reasoning, expires_at, size)
        shelf.size += size
        self._bytes += size
        self._count += 1
        while shelf.size > self.principal_bytes and shelf.entries:
            self._evict(owner, shelf)
        while self._bytes > self.max_bytes:
            largest = max(self._shelves, key=lambda name: self._shelves[name].size)
            self._evict(largest, self._shelves[largest])

    def _forgot(self, shelf: _Shelf, size: int) -> None:
        shelf.size -= size
        self._bytes -= size
        self._count -= 1

    def _evict(self, owner: str, shelf: _Shelf) -> None:
        _, (_, _, size) = shelf.entries.popitem(last=False)
        self._forgot(shelf, size)
        self.stats.evicted += 1
        if not shelf.entries:
            del self._shelves[owner]

    def _live(self, owner: str, key: bytes, now: float) -> tuple[str, float, int] | None:
        shelf = self._shelves.get(owner)
        entry = shelf.entries.get(key) if shelf is not None else None
        if entry is None or shelf is None:
            return None
        if entry[1] <= now:
            del shelf.entries[key]
            self._forgot(shelf, entry[2])
            if not shelf.entries:
                del self._shelves[owner]
            return None
        shelf.entries.move_to_end(key)
        return entry

    def remember(
        self, owner: str, messages: Sequence[dict[str, Any]], turn: dict[str, Any]
    ) -> None:
        """Keep ``turn``'s reasoning (an assistant tool-call message exai returned)
        for the conversation ``messages`` it answered. A round without reasoning
        is kept too, so that it is known to have none."""
        if not turn.get("tool_calls") or self.max_bytes <= 0:
            return
        reasoning = reasoning_of(turn)
        running = _seed(owner)
        for message in messages:
            running.update(_unit(message))
        running.update(_unit(turn))
        key = running.digest()
        size = len(reasoning.encode()) + ENTRY_OVERHEAD
        now = self._clock()
        self._put(owner, key, reasoning, now + self.ttl_s, size)
        self.stats.kept += 1
        if self._load is not None:
            self._queue(KeptReasoning(key, owner, reasoning, size, now, now + self.ttl_s))

    def restore(
        self, owner: str, messages: Sequence[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[int]]:
        """``messages`` with the reasoning this cache knows put back on tool-call
        messages that lack it, and the indices of the rounds it does not know
        (a round it knows to have had no reasoning is not among them). The input
        is not modified."""
        return self._restore(owner, messages, round_digests(owner, messages))

    def _restore(
        self, owner: str, messages: Sequence[dict[str, Any]], rounds: dict[int, bytes]
    ) -> tuple[list[dict[str, Any]], list[int]]:
        out = list(messages)
        unknown: list[int] = []
        now = self._clock()
        for index, key in rounds.items():
            if reasoning_of(messages[index]):
                continue
            entry = self._live(owner, key, now)
            if entry is None:
                self.stats.misses += 1
                unknown.append(index)
                continue
            self.stats.hits += 1
            if entry[0]:
                out[index] = {**messages[index], "reasoning_content": entry[0]}
        return out, unknown

    # --- the shared store --------------------------------------------------------

    def share(self, load: Load, wake: Callable[[], None] = lambda: None) -> None:
        """Read the rounds memory lacks with ``load``, and from now on queue every
        round kept for the store, calling ``wake`` when one is queued."""
        self._load = load
        self._wake = wake

    def _queue(self, entry: KeptReasoning) -> None:
        self._pending.append(entry)
        self._pending_bytes += entry.size
        self._trim_pending()
        self._wake()

    def _trim_pending(self) -> None:
        # While the store is unreachable, what waits is bounded like memory: the
        # oldest rounds are dropped (this daemon's memory still holds them).
        while self._pending_bytes > self.max_bytes and self._pending:
            self._pending_bytes -= self._pending.pop(0).size
            self.stats.dropped += 1

    def take_pending(self) -> list[KeptReasoning]:
        """The rounds kept since the last call, for the store."""
        taken, self._pending, self._pending_bytes = self._pending, [], 0
        return taken

    def requeue(self, entries: Sequence[KeptReasoning]) -> None:
        """Rounds whose write failed, to be written with the next ones."""
        self._pending[:0] = entries
        self._pending_bytes += sum(e.size for e in entries)
        self._trim_pending()

    async def recall(self, owner: str, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with the reasoning known for their tool rounds put back, as
        :meth:`restore` does, once per request: the rounds memory does not hold are
        first read from the store (with :meth:`share`), in one query; nothing is
        read when memory holds them all (every request of a loop that stays on one
        daemon). What is still unknown is left for :func:`settle_reasoning`.

        The newest round may have been answered a moment ago by another daemon
        whose background writer has not written it yet; when the store does not
        have it, it is asked once more after :data:`RECHECK_S`.
        """
        if not lacking_reasoning(messages):
            return list(messages)
        rounds = round_digests(owner, messages)
        if self._load is not None:
            now = self._clock()
            wanted = [
                key
                for index, key in rounds.items()
                if not reasoning_of(messages[index]) and self._live(owner, key, now) is None
            ]
            if wanted:
                missing = await self._read(owner, wanted)
                if rounds[max(rounds)] in missing:
                    await asyncio.sleep(RECHECK_S)
                    await self._read(owner, missing)
        return self._restore(owner, messages, rounds)[0]

    async def _read(self, owner: str, keys: Collection[bytes]) -> set[bytes]:
        """Read ``keys`` of ``owner`` into memory; the keys the store did not have."""
        assert self._load is not None
        self.stats.loads += 1
        try:
            async with asyncio.timeout(LOAD_TIMEOUT_S):
                rows = await self._load(owner, list(keys))
        except Exception as exc:  # the round is then unknown, as without a store
            self.stats.load_failures += 1
            log.warning("reading kept tool-round reasoning failed",
                        error=f"{type(exc).__name__}: {exc}")  # fmt: skip
            return set()
        missing = set(keys)
        for row in rows:
            if row.owner == owner and row.key in missing:
                missing.discard(row.key)
                self._put(owner, row.key, row.reasoning, row.expires_at, row.size)
                self.stats.loaded += 1
        return missing
