"""A free loopback port, for the stand-ins, the tests and the benchmarks.

The port is free when this returns and may be taken by anything before it is
bound again; every user binds it at once, and the tests' ``listening`` check
refuses a probe that connected to itself (see ``tests/reliability/harness.py``).
"""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing was bound to a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
