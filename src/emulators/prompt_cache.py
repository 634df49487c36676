"""The emulated vendors' prompt caches: how many prompt tokens each bills as cached.

Part of the provider emulator (a test fixture). Moonshot and Z.ai both cache
prompt prefixes on their own, with no request parameter: the tokens a request
shares, from its first one, with a request the same model saw before are
billed at the cached price and reported in the usage, Moonshot as
``usage.cached_tokens`` and ``usage.prompt_tokens_details.cached_tokens``,
Z.ai as ``usage.prompt_tokens_details.cached_tokens``.

Here a request's cached tokens are those of the longest prefix it shares with
one of the model's earlier requests: the messages that serialize identically,
then, in the first message that differs, the leading tokens of its text when
everything else about it (role, tool calls...) is the same. Tokens are the
emulator's own (the words :func:`exai.emulators.replies.prompt_tokens` counts),
so cached tokens never exceed prompt tokens. ``block_tokens`` rounds the count
down to whole blocks, as a vendor matching in fixed-size chunks would.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from exai.emulators.replies import message_text
from exai.emulators.vendor_wire import split_tokens

__all__ = ["PromptCache"]

# (the whole message, the message without its text, its tokens)
_Entry = tuple[str, str, list[str]]


def _entry(message: dict[str, Any]) -> _Entry:
    whole = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    shape = {k: v for k, v in message.items() if k != "content"}
    shape_json = json.dumps(shape, ensure_ascii=False, separators=(",", ":"))
    return whole, shape_json, split_tokens(message_text(message))


def _shared(prompt: Sequence[_Entry], seen: Sequence[_Entry]) -> int:
    tokens = 0
    for mine, theirs in zip(prompt, seen, strict=False):
        if mine[0] == theirs[0]:
            tokens += len(mine[2])
            continue
        if mine[1] == theirs[1]:
            for a, b in zip(mine[2], theirs[2], strict=False):
                if a != b:
                    break
                tokens += 1
        break
    return tokens


class PromptCache:
    """The prompts each (vendor, model) has seen, newest ``capacity`` kept."""

    def __init__(self, capacity: int = 256) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], deque[list[_Entry]]] = {}

    def lookup(
        self, vendor: str, model: str, messages: Sequence[dict[str, Any]], block_tokens: int = 1
    ) -> int:
        """The cached tokens of this prompt; the prompt is remembered for later ones."""
        prompt = [_entry(m) for m in messages if isinstance(m, dict)]
        with self._lock:
            seen = self._seen.setdefault((vendor, model), deque(maxlen=self._capacity))
            best = max((_shared(prompt, earlier) for earlier in seen), default=0)
            seen.append(prompt)
        block = max(1, block_tokens)
        return best // block * block

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()
