"""The emulated vendors' prompt cache: what share of a prompt they have seen before.

Part of the provider emulator (a test fixture). Moonshot and Z.ai cache prompt
prefixes automatically and bill the part of a new prompt that matches a prefix
they have seen (for the same model and account) at a lower price, reporting it as
``usage.prompt_tokens_details.cached_tokens``. The emulator does the same in its
own token units (:func:`exai.emulators.replies.prompt_tokens`): it keeps the
prompts it has seen per (vendor, model, API key) and reports the longest prefix a
new prompt shares with any of them. A prompt that differs in one byte early on
therefore gets little or nothing from the cache, as with the real vendors.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from exai.emulators.replies import message_text
from exai.emulators.vendor_wire import split_tokens

__all__ = ["PromptCache", "prompt_units"]

# Each (vendor, model, key) remembers at most this many prefixes (units).
_PREFIXES_KEPT = 2_000_000
_CONTENT_KEYS = frozenset({"content"})


def prompt_units(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The prompt as comparable units: one marker per message (its role and every
    field but the text, hashed) followed by its text tokens. Only text tokens
    count as prompt tokens; a marker makes a change of role or of tool calls
    end the shared prefix there."""
    units: list[tuple[str, str]] = []
    for message in messages:
        rest = {k: v for k, v in message.items() if k not in _CONTENT_KEYS}
        if not isinstance(message.get("content"), str | None):
            rest["content"] = message.get("content")
        digest = hashlib.sha256(
            json.dumps(rest, sort_keys=True, ensure_ascii=False, default=str).encode()
        ).hexdigest()
        units.append(("m", digest))
        units.extend(("t", token) for token in split_tokens(message_text(message)))
    return units


class PromptCache:
    """Prefixes seen, per (vendor, model, API key); safe to share between threads.

    Every prefix of every prompt seen is remembered as a chained hash, so finding
    the longest one a new prompt shares costs one pass over that prompt, however
    many prompts came before it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str, str], set[int]] = {}

    def observe(self, key: tuple[str, str, str], messages: list[dict[str, Any]]) -> int:
        """Remember this prompt; return how many of its tokens an earlier prompt
        under ``key`` already had as a prefix."""
        chain: list[int] = []
        tokens: list[int] = []
        digest, count = 0, 0
        for unit in prompt_units(messages):
            digest = hash((digest, unit))
            count += unit[0] == "t"
            chain.append(digest)
            tokens.append(count)
        with self._lock:
            seen = self._seen.setdefault(key, set())
            cached = 0
            for digest, count in zip(chain, tokens, strict=True):
                if digest not in seen:
                    break
                cached = count
            if len(seen) + len(chain) > _PREFIXES_KEPT:
                seen.clear()  # a crude eviction: the vendors' caches expire too
            seen.update(chain)
        return cached

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()
