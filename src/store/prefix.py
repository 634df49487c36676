"""What "turn N's messages are a prefix of turn N+1's" means, byte for byte.

A vendor's prompt cache matches the tokens of a request against requests it
has seen, from the first token on; any byte that differs ends the match. The
comparison here is made on the JSON of the messages as a client sends them:
keys in the order the dicts hold them (no sorting, so a reordered dict shows up
as a difference), UTF-8 text as is, no spaces between tokens. The *stable
prefix* of a call is its messages minus its own tail (the files read for it and
its new input, see :class:`exai.store.history.AssembledMessages`), serialized as
the opening of a JSON array: ``[m1,m2,...,mk``, which the next call's array must
start with, followed by ``,`` or ``]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["canonical_json", "prefix_bytes", "shares_prefix"]


def canonical_json(messages: Sequence[Mapping[str, Any]]) -> bytes:
    """The messages as the JSON array a client sends, in UTF-8."""
    return json.dumps(list(messages), ensure_ascii=False, separators=(",", ":")).encode()


def prefix_bytes(messages: Sequence[Mapping[str, Any]], stable: int) -> bytes:
    """The opening bytes of ``canonical_json(messages)`` covering the first ``stable``
    messages: the array without its closing bracket."""
    return canonical_json(messages[:stable])[:-1]


def shares_prefix(
    earlier: Sequence[Mapping[str, Any]], stable: int, later: Sequence[Mapping[str, Any]]
) -> bool:
    """True when the first ``stable`` messages of ``earlier`` open ``later`` byte for byte."""
    if stable == 0:
        return True
    head = prefix_bytes(earlier, stable)
    data = canonical_json(later)
    return data.startswith(head) and data[len(head) : len(head) + 1] in (b",", b"]")
