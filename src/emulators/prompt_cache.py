"""The emulated vendors' prompt cache: what share of a prompt they have seen before.

Part of the provider emulator (a test fixture). Moonshot and Z.ai cache prompt
prefixes automatically and bill the part of a new prompt that matches a prefix
they have seen (for the same model and account) at a lower price, reporting it as
``usage.prompt_tokens_details.cached_tokens``. The emulator does the same in its
own token units (:func:`exai.emulators.replies.prompt_tokens`): it keeps the
prompts it has seen per (vendor, model, API key) and reports the longest prefix a
new prompt shares with any of them. A prompt that differs in one byte early on
therefore gets little or nothing from the cache, as with the real vendors.

Moonshot caches only prompts longer than 256 tokens (3p kimi-api skill quoting
platform.moonshot.cn's context-caching guide; VENDORS.md E10) [K-11]: on its
path a prompt of 256 tokens or fewer (in the emulator's units) is not
remembered, so it never becomes a cached prefix; a later prompt still gets the
whole prefix it shares with a remembered one. Z.ai documents no threshold and
every prompt is remembered (docs.z.ai/help/faq: cache hits are billed at a
reduced rate).
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from exai.emulators.replies import message_text
from exai.emulators.vendor_wire import split_tokens

__all__ = ["MOONSHOT_MIN_CACHED_PROMPT", "PromptCache", "prompt_units"]

# Moonshot remembers a prompt for its cache only when it is longer than this.
MOONSHOT_MIN_CACHED_PROMPT = 256

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

    def observe(
        self, key: tuple[str, str, str], messages: list[dict[str, Any]], *, longer_than: int = 0
    ) -> int:
        """Return how many of this prompt's tokens an earlier prompt under ``key``
        already had as a prefix; remember the prompt if it has more than
        ``longer_than`` tokens."""
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
            if (tokens[-1] if tokens else 0) <= longer_than:
                return cached
            if len(seen) + len(chain) > _PREFIXES_KEPT:
                seen.clear()  # a crude eviction: the vendors' caches expire too
            seen.update(chain)
        return cached

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()
