"""Deterministic embeddings for the provider emulator. A TEST FIXTURE.

Stands in for a real embedding model (GLM ``embedding-3``, an OpenAI-compatible
``/v1/embeddings``) in tests and benchmarks: the same text always gives the same
vector, and texts that share words land close together. Each word, lower-cased
and crudely stemmed, adds a signed unit at a position hashed from it; its
character trigrams add smaller ones, so that "target" and "targets" are near.
The vector is normalised to length 1. Nothing here is meant to be a good
embedding model, only a faithful and repeatable one.

The two paths check ``dimensions`` as their vendors do [G-9]: Z.ai's
``embedding-3`` takes 256, 512, 1024 or 2048 and defaults to 2048 (3p zai-rs,
rubydoc smart_prompt; VENDORS.md row 46), anything else is code 1210 (the
exact message was not found: the emulator's own); the OpenAI-compatible
``/v1/embeddings`` takes 1..4096 and defaults to 256 here.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any, Final

__all__ = ["DEFAULT_DIMENSIONS", "GLM_DIMENSIONS", "embed_text", "embeddings_body"]

DEFAULT_DIMENSIONS: Final = 256  # the OpenAI-compatible path's default
GLM_DIMENSIONS: Final = (256, 512, 1024, 2048)  # embedding-3; the last is its default
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


def _error(glm: bool, message: str) -> tuple[int, dict[str, Any]]:
    inner = (
        {"code": "1210", "message": message}
        if glm
        else {"message": message, "type": "invalid_request_error"}
    )
    return 400, {"error": inner}


def embeddings_body(body: dict[str, Any], vendor: str = "kimi") -> tuple[int, dict[str, Any]]:
    """``(status, body)`` of an OpenAI-shaped (or, for ``vendor="glm"``, Z.ai's)
    embeddings reply."""
    glm = vendor == "glm"
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return _error(glm, "input must be a string or a list of strings")
    dimensions = body.get("dimensions")
    if glm:
        dimensions = GLM_DIMENSIONS[-1] if dimensions is None else dimensions
        if type(dimensions) is not int or dimensions not in GLM_DIMENSIONS:
            return _error(glm, f"dimensions must be one of {', '.join(map(str, GLM_DIMENSIONS))}")
    else:
        dimensions = dimensions or DEFAULT_DIMENSIONS
        if not isinstance(dimensions, int) or not 1 <= dimensions <= 4096:
            return _error(glm, "dimensions must be 1..4096")
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
