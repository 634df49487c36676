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
from collections import OrderedDict
from typing import Any

from exai.emulators.replies import message_text
from exai.emulators.vendor_wire import split_tokens

__all__ = ["PromptCache", "prompt_units"]

# Each (vendor, model, key) remembers this many prompts, newest kept.
_PROMPTS_KEPT = 64
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


def _shared_tokens(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> int:
    tokens = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        if left[0] == "t":
            tokens += 1
    return tokens


class PromptCache:
    """Prompts seen, per (vendor, model, API key); safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str, str], OrderedDict[int, list[tuple[str, str]]]] = {}

    def observe(self, key: tuple[str, str, str], messages: list[dict[str, Any]]) -> int:
        """Remember this prompt; return how many of its tokens an earlier prompt
        under ``key`` already had as a prefix."""
        units = prompt_units(messages)
        with self._lock:
            seen = self._seen.setdefault(key, OrderedDict())
            cached = max((_shared_tokens(units, old) for old in seen.values()), default=0)
            fingerprint = hash(tuple(units))
            seen.pop(fingerprint, None)
            seen[fingerprint] = units
            while len(seen) > _PROMPTS_KEPT:
                seen.popitem(last=False)
        return cached

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()
