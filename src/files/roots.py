"""Which roots a call may read: the configured ones, and how far the calling IDE's count.

An MCP client declares its workspace roots (the project open in the IDE), and
the shim passes them on with each call. How far they count depends on where
the daemon listens and on what the operator set:

* A daemon bound to loopback serves the same user's IDE on the same machine:
  the client's roots are allowed beside the default root (the home directory),
  so a project outside ``$HOME`` works with no configuration.
* When ``EXAI_ALLOWED_ROOTS`` is set, it is a ceiling: the client's roots can
  narrow it (to the parts of each root inside it) but never widen it.
* A daemon reachable from other hosts ignores the client's roots: they name
  directories on the client's machine, and a remote caller never widens what
  the daemon's host may read.

Everything the file policy refuses inside a root (system directories,
credential stores, symlinks out) stays refused whatever the roots are.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence

__all__ = ["effective_roots", "is_loopback"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def effective_roots(
    configured: Sequence[str], client: Sequence[str], *, ceiling: bool, loopback: bool
) -> list[str]:
    """The roots one call may read; see the module docstring for the rules."""
    given = [os.path.normpath(p) for p in client if os.path.isabs(p)]
    if not given or not loopback:
        return list(configured)
    if not ceiling:
        return list(dict.fromkeys([*configured, *given]))
    narrowed: list[str] = []
    for path in given:
        for root in (os.path.normpath(r) for r in configured):
            if _within(path, root):
                narrowed.append(path)
            elif _within(root, path):
                narrowed.append(root)
    return list(dict.fromkeys(narrowed))
