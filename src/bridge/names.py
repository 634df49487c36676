"""The names bridged tools get in the daemon: ``server__tool``, safe for every MCP client.

Clients accept tool names of ``[A-Za-z0-9_-]`` up to 64 characters, so other
characters become ``_`` and long names are cut. Both can make two tools collide,
and so can a bridged name that equals a daemon tool. Every name that would be
ambiguous, or had to be cut, gets a suffix derived from its own server and tool
names instead. The outcome depends only on the set of tools, never on the
order in which servers came up, so a restart gives every tool the same name.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable

__all__ = ["MAX_NAME", "assign_names", "sanitize"]

MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(text: str) -> str:
    return _UNSAFE.sub("_", text)


def _suffixed(base: str, server: str, tool: str, digits: int) -> str:
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:digits]
    return f"{base[: MAX_NAME - digits - 1]}_{digest}"


def assign_names(
    pairs: Iterable[tuple[str, str]], reserved: Iterable[str] = ()
) -> dict[tuple[str, str], str]:
    """Map each ``(server, tool)`` to a unique exposed name that avoids ``reserved``."""
    unique = sorted(set(pairs))
    taken = set(reserved)
    bases = {pair: sanitize(f"{pair[0]}__{pair[1]}") for pair in unique}
    counts = Counter(bases.values())
    names: dict[tuple[str, str], str] = {}
    for pair, base in bases.items():
        if counts[base] == 1 and len(base) <= MAX_NAME and base not in taken:
            names[pair] = base
    used = taken | set(names.values())
    for pair, base in bases.items():
        if pair in names:
            continue
        digits = 8
        name = _suffixed(base, *pair, digits)
        while name in used:  # a 32-bit digest clash: lengthen until unique
            digits += 2
            name = _suffixed(base, *pair, digits)
        names[pair] = name
        used.add(name)
    return names
