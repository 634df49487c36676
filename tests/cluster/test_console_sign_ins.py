"""Console sign-ins across daemons, without a server: two daemons' :class:`SignIns`
over one store stand-in. A sign-in on one is accepted by the other, a sign-out on
either ends it on both at once, and expiry and a credential no longer configured
are honoured wherever the session is checked. On a store of one daemon (SQLite),
memory is trusted and the store is read only after a restart."""

from __future__ import annotations

from typing import Any

from exai.auth import Credential, Principal, budget_from_claim
from exai.store.sign_ins import SignInRow
from exai.web.console.sessions import principal_from_record, principal_record, session_key
from exai.web.console.sign_ins import SignIns

ALICE = Principal("alice", scopes=frozenset({"chat"}), credential=Credential("token", "tok-id"))


class StandIn:
    """The store's sign-in rows as a dict, counting reads."""

    def __init__(self, shared: bool) -> None:
        self.shared = shared
        self.rows: dict[str, SignInRow] = {}
        self.reads = 0

    async def put_sign_in(self, row: SignInRow) -> None:
        self.rows[row.id_hash] = row

    async def sign_in_row(self, id_hash: str) -> SignInRow | None:
        self.reads += 1
        return self.rows.get(id_hash)

    async def set_sign_in_flashes(self, id_hash: str, flashes: str) -> None:
        self.rows[id_hash] = self.rows[id_hash]._replace(flashes=flashes)

    async def delete_sign_in(self, id_hash: str) -> None:
        self.rows.pop(id_hash, None)


def configured(*ids: str) -> Any:
    """Port.credential_problem of a daemon whose tokens have these ids."""
    return lambda owner, credential, now: (
        None if credential is None or credential.id in ids else "no longer configured"
    )


def daemons(store: StandIn, ttl_s: float = 3600.0) -> tuple[SignIns, SignIns]:
    return SignIns(store, ttl_s, configured("tok-id")), SignIns(store, ttl_s, configured("tok-id"))


async def test_a_sign_in_on_one_daemon_signs_in_on_the_other() -> None:
    store = StandIn(shared=True)
    one, two = daemons(store)
    session = await one.sign_in(ALICE, now=100.0)

    found = await two.check(session.id, now=101.0)

    assert found is not None and found.principal == ALICE and found.csrf == session.csrf
    assert found.principal.credential == ALICE.credential
    assert session.id not in str(store.rows)  # the store holds a digest, never the cookie


async def test_a_sign_out_on_either_daemon_ends_the_session_on_both_at_once() -> None:
    store = StandIn(shared=True)
    one, two = daemons(store)
    session = await one.sign_in(ALICE, now=100.0)
    assert await two.check(session.id, now=101.0) is not None  # now held by both

    assert await two.sign_out(session.id) is not None

    assert await one.check(session.id, now=102.0) is None
    assert one.get(session.id, 102.0) is None  # and forgotten here


async def test_an_expired_session_signs_no_one_in_anywhere() -> None:
    store = StandIn(shared=True)
    one, two = daemons(store, ttl_s=60.0)
    session = await one.sign_in(ALICE, now=100.0)
    assert await two.check(session.id, now=159.0) is not None
    assert await two.check(session.id, now=160.0) is None
    assert await one.check(session.id, now=160.0) is None


async def test_a_daemon_refuses_a_session_whose_token_it_no_longer_has() -> None:
    store = StandIn(shared=True)
    one = SignIns(store, 3600.0, configured("tok-id"))
    rotated = SignIns(store, 3600.0, configured("another-id"))
    session = await one.sign_in(ALICE, now=100.0)
    assert await rotated.check(session.id, now=101.0) is None


async def test_messages_shown_once_travel_with_the_session() -> None:
    store = StandIn(shared=True)
    one, two = daemons(store)
    session = await one.sign_in(ALICE, now=100.0)
    session.flash("ok", "Forked.")
    await one.save(session)

    elsewhere = await two.check(session.id, now=101.0)
    assert elsewhere is not None and elsewhere.take_flashes() == [("ok", "Forked.")]
    await two.save(elsewhere)
    again = await one.check(session.id, now=102.0)
    assert again is not None and again.take_flashes() == []


async def test_on_a_store_of_one_daemon_memory_is_trusted_and_a_restart_reads_the_store() -> None:
    store = StandIn(shared=False)
    before = SignIns(store, 3600.0, configured("tok-id"))
    session = await before.sign_in(ALICE, now=100.0)
    assert await before.check(session.id, now=101.0) is session
    assert store.reads == 0

    restarted = SignIns(store, 3600.0, configured("tok-id"))
    found = await restarted.check(session.id, now=102.0)
    assert found is not None and found.principal.name == "alice" and store.reads == 1
    await restarted.check(session.id, now=103.0)
    assert store.reads == 1


def test_a_principal_survives_its_record() -> None:
    jwt = Principal("bob", scopes=None, method="jwt", expires_at=5000.0, memory=False,
                    budget=budget_from_claim("5 USD/day"),
                    credential=Credential("jwt", "id", "key", 5000.0))  # fmt: skip
    for principal in (ALICE, jwt, Principal("anonymous", method="none")):
        again = principal_from_record(principal_record(principal))
        assert again == principal and again.credential == principal.credential
    assert len(session_key("cookie")) == 64 and session_key("cookie") != session_key("cookie2")
