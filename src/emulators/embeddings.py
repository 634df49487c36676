"""Deterministic embeddings for the provider emulator. A TEST FIXTURE.

Stands in for a real embedding model (GLM ``embedding-3``, an OpenAI-compatible
``/v1/embeddings``) in tests and benchmarks: the same text always gives the same
vector, and texts that share words land close together. Each word, lower-cased
and crudely stemmed, adds a signed unit at a position hashed from it; its
character trigrams add smaller ones, so that "target" and "targets" are near.
The vector is normalised to length 1. Nothing here is meant to be a good
embedding model, only a faithful and repeatable one.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any, Final

__all__ = ["DEFAULT_DIMENSIONS", "embed_text", "embeddings_body"]

DEFAULT_DIMENSIONS: Final = 256
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP: Final = frozenset(
    "a an and are as at be by do does for from has have i in is it of on or that the this "
    "to was we what which with you".split()
)
_TRIGRAM_WEIGHT = 0.35


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _slot(feature: str, dimensions: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dimensions, 1.0 if (value >> 63) & 1 else -1.0


def embed_text(text: str, dimensions: int = DEFAULT_DIMENSIONS) -> list[float]:
    vector = [0.0] * dimensions
    for word in _WORD.findall(text.casefold()):
        if word in _STOP:
            continue
        stem = _stem(word)
        index, sign = _slot("w:" + stem, dimensions)
        vector[index] += sign
        padded = f"^{stem}$"
        for i in range(len(padded) - 2):
            index, sign = _slot("t:" + padded[i : i + 3], dimensions)
            vector[index] += sign * _TRIGRAM_WEIGHT
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0:
        vector[0] = 1.0
        return vector
    return [x / norm for x in vector]


def embeddings_body(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """``(status, body)`` of an OpenAI-shaped (and Z.ai-shaped) embeddings reply."""
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return 400, {"error": {"message": "input must be a string or a list of strings",
                               "type": "invalid_request_error"}}  # fmt: skip
    dimensions = body.get("dimensions") or DEFAULT_DIMENSIONS
    if not isinstance(dimensions, int) or not 1 <= dimensions <= 4096:
        return 400, {"error": {"message": "dimensions must be 1..4096",
                               "type": "invalid_request_error"}}  # fmt: skip
    tokens = sum(len(_WORD.findall(t)) for t in texts)
    return 200, {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": embed_text(t, dimensions)}
            for i, t in enumerate(texts)
        ],
        "model": str(body.get("model", "")),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
