"""How far an IDE's declared roots count (exai.files.roots), without a daemon."""

from __future__ import annotations

import pytest

from exai.files.roots import effective_roots, is_loopback


def test_loopback_daemon_allows_the_clients_roots_beside_the_default():
    got = effective_roots(["/home/u"], ["/srv/project"], ceiling=False, loopback=True)
    assert got == ["/home/u", "/srv/project"]


def test_a_set_ceiling_is_narrowed_never_widened():
    ceiling = ["/work"]
    assert effective_roots(ceiling, ["/work/app"], ceiling=True, loopback=True) == ["/work/app"]
    assert effective_roots(ceiling, ["/srv/other"], ceiling=True, loopback=True) == []
    # A client root above the ceiling narrows to the ceiling, never past it.
    assert effective_roots(ceiling, ["/"], ceiling=True, loopback=True) == ["/work"]
    assert effective_roots(ceiling, ["/workshop"], ceiling=True, loopback=True) == []


def test_a_daemon_reachable_from_other_hosts_ignores_client_roots():
    got = effective_roots(["/home/u"], ["/srv/project", "/"], ceiling=False, loopback=False)
    assert got == ["/home/u"]


def test_no_roots_or_relative_ones_change_nothing():
    assert effective_roots(["/home/u"], [], ceiling=False, loopback=True) == ["/home/u"]
    assert effective_roots(["/home/u"], ["project"], ceiling=False, loopback=True) == ["/home/u"]
    assert effective_roots(["/home/u"], ["/a/../b"], ceiling=False, loopback=True) == [
        "/home/u", "/b"
    ]  # fmt: skip


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.0.0.5", False),
    ("example.com", False),
])  # fmt: skip
def test_loopback_addresses(host: str, loopback: bool):
    assert is_loopback(host) is loopback
