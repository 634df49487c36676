"""The key ring and the Authenticator's use of it, without a store or a clock: how a
key is spelled and parsed, what a revoked, expired or wrong key is told, what a job
made with one is told, JWTs refused by jti, environment tokens as before, and when a
daemon is open to everyone."""

from __future__ import annotations

import time

import pytest

from exai.auth import Authenticator, Credential, issue_token
from exai.errors import UnauthorizedError
from exai.keys import (
    KeyRecord,
    KeyRing,
    new_key,
    parse_expiry,
    parse_models,
    parse_rate,
    parse_scopes,
    split_key,
)

SECRET = "ring-jwt-secret-0123456789abcdef0123"
NOW = 1_800_000_000.0


def _ring(**kw: object) -> tuple[KeyRing, KeyRecord, str]:
    key_id, token, digest = new_key()
    record = KeyRecord(id=key_id, secret_hash=digest, principal="bob",
                       scopes=frozenset({"chat"}), rate_per_min=60,
                       models=frozenset({"kimi-k2.6"}), **kw)  # type: ignore[arg-type]  # fmt: skip
    ring = KeyRing()
    ring.replace([record], ["stolen-jti"], version=1)
    return ring, record, token


def test_a_key_is_spelled_with_a_readable_id_and_a_long_secret() -> None:
    key_id, token, _ = new_key()
    assert token.startswith(f"exai_{key_id}_") and len(token) > 50
    assert split_key(token) == (key_id, token.split("_", 2)[2])
    for wrong in ["exai_", "exai_XYZ_abc", "tok-bob", f"exai_{key_id}_short", f"exai_{key_id}"]:
        assert split_key(wrong) is None


def test_the_grant_spellings_and_what_is_wrong_with_them() -> None:
    assert parse_rate("60/min") == 60 and parse_rate(30) == 30 and parse_rate("") is None
    assert parse_scopes("chat, completion") == {"chat", "completion"}
    assert parse_scopes("*") is None and parse_models("all") is None
    assert parse_models(["glm-5.1"]) == {"glm-5.1"}
    assert parse_expiry("30d", NOW) == NOW + 30 * 86400
    assert parse_expiry("2030-01-01", NOW) == 1893456000.0
    assert parse_expiry("never", NOW) is None
    for call, words in [(lambda: parse_rate("0/min"), "rate"),
                        (lambda: parse_rate(True), "rate"),
                        (lambda: parse_expiry("2000-01-01", NOW), "future"),
                        (lambda: parse_expiry("soon", NOW), "expires"),
                        (lambda: parse_scopes("chat;drop"), "scopes"),
                        (lambda: parse_models("a b\\x00"), "models")]:  # fmt: skip
        with pytest.raises(ValueError, match=words):
            call()


def test_the_authenticator_gives_the_keys_grant_and_refuses_what_is_not_granted() -> None:
    ring, record, token = _ring(expires_at=time.time() + 3600)
    auth = Authenticator({"tok-alice-0123456789": "alice"})
    auth.keys = ring
    principal = auth.authenticate(token)
    assert (principal.name, principal.key_id, principal.method) == ("bob", record.id, "key")
    assert principal.scopes == {"chat"} and principal.models == {"kimi-k2.6"}
    assert principal.rate_per_min == 60 and principal.expires_at == record.expires_at
    assert principal.credential == Credential("key", record.id, expires_at=record.expires_at)
    assert auth.credential_problem("bob", principal.credential, time.time()) is None
    assert ring.take_used().keys() == {record.id} and ring.take_used() == {}

    with pytest.raises(UnauthorizedError, match="invalid token"):
        auth.authenticate(token[:-4] + "AAAA")  # the right id, a wrong secret
    assert auth.authenticate("tok-alice-0123456789").name == "alice"  # environment tokens

    ring.replace([KeyRecord(**{**{f: getattr(record, f) for f in record.__slots__},
                               "revoked_at": NOW})], [], version=2)  # fmt: skip
    with pytest.raises(UnauthorizedError, match="this key was revoked"):
        auth.authenticate(token)
    problem = auth.credential_problem("bob", principal.credential, time.time())
    assert problem is not None and "was revoked" in problem
    with pytest.raises(UnauthorizedError, match="this key was revoked"):
        ring.check(record.id, time.time())


def test_an_expired_key_is_refused_saying_so() -> None:
    ring, record, token = _ring(expires_at=time.time() - 1)
    auth = Authenticator({"tok-alice-0123456789": "alice"})
    auth.keys = ring
    with pytest.raises(UnauthorizedError, match="this key expired"):
        auth.authenticate(token)
    problem = auth.credential_problem("bob", Credential("key", record.id), time.time())
    assert problem is not None and "expired" in problem
    assert "no longer exists" in (auth.credential_problem(
        "bob", Credential("key", "000000000000"), time.time()) or "")  # fmt: skip


def test_a_jwt_is_refused_by_its_jti_and_what_it_made_stops() -> None:
    ring, _, _ = _ring()
    auth = Authenticator(jwt_secret=SECRET)
    auth.keys = ring
    stolen = issue_token(SECRET, "erin", jti="stolen-jti")
    with pytest.raises(UnauthorizedError, match="this token was revoked"):
        auth.authenticate(stolen)
    fine = auth.authenticate(issue_token(SECRET, "erin"))
    assert fine.credential is not None and fine.credential.jti
    assert auth.credential_problem("erin", fine.credential, time.time()) is None
    made = Credential.from_public({**fine.credential.public(), "jti": "stolen-jti"})
    assert "was revoked" in (auth.credential_problem("erin", made, time.time()) or "")


def test_a_daemon_without_credentials_is_open_until_its_store_holds_a_key() -> None:
    auth = Authenticator()
    auth.keys = KeyRing()
    assert auth.open and auth.authenticate(None).name == "anonymous"
    ring, _, token = _ring()
    auth.keys = ring
    assert not auth.open
    with pytest.raises(UnauthorizedError):
        auth.authenticate(None)
    assert auth.authenticate(token).name == "bob"
