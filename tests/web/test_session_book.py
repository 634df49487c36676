"""The MCP session book's rules, with a hand-turned clock and no server."""

from __future__ import annotations

from exai.web.session_book import SessionBook


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_openings_being_answered_count_against_the_cap():
    book = SessionBook(per_principal=2, total=10, idle_s=60)
    assert book.reserve("alice") is None
    assert book.reserve("alice") is None
    refused = book.reserve("alice")
    assert refused is not None and refused.mine
    assert book.reserve("bob") is None  # another principal is not held back
    book.release("alice")
    assert book.reserve("alice") is None


def test_the_total_counts_every_principal():
    book = SessionBook(per_principal=5, total=2, idle_s=60)
    book.opened("s1", "alice")
    book.opened("s2", "bob")
    refused = book.reserve("carol")
    assert refused is not None and not refused.mine and "EXAI_MCP_MAX_SESSIONS=2" in refused.message


def test_a_session_is_forgotten_only_after_idle_s_with_nothing_in_flight():
    clock = Clock()
    book = SessionBook(per_principal=1, total=10, idle_s=30, clock=clock)
    book.opened("s1", "alice")
    book.begin("s1")  # a GET stream held open
    clock.now += 3600
    assert book.owner("s1") == "alice"  # in flight: never idle
    book.end("s1")
    clock.now += 30
    assert book.owner("s1") == "alice"
    clock.now += 0.5
    assert book.owner("s1") is None
    assert book.reserve("alice") is None  # its place is free again


def test_one_stream_per_session_until_it_closes():
    book = SessionBook(per_principal=1, total=10, idle_s=30)
    book.opened("s1", "alice")
    assert book.open_stream("s1")
    assert not book.open_stream("s1")
    book.close_stream("s1")
    assert book.open_stream("s1")


def test_an_ended_session_leaves_its_owners_count():
    book = SessionBook(per_principal=1, total=10, idle_s=30)
    book.opened("s1", "alice")
    assert book.held_by("alice") == 1
    book.ended("s1")
    assert book.held_by("alice") == 0 and len(book) == 0
