"""What a principal's credential records, and whether it still grants anything later."""

from __future__ import annotations

import time

from exai.auth import Authenticator, Credential, issue_token

SECRET = "jwt-secret-for-credential-tests-0123456789"


def test_a_static_token_is_recorded_by_an_identifier_and_checked_against_the_settings():
    before = Authenticator({"tok-alice-1": "alice", "tok-bob-1": "bob"})
    credential = before.authenticate("tok-alice-1").credential
    assert credential is not None and credential.kind == "token"
    assert "tok-alice" not in repr(credential) and len(credential.id) == 24
    assert before.credential_problem("alice", credential, time.time()) is None
    rotated = Authenticator({"tok-alice-2": "alice"})
    assert "no longer configured" in rotated.credential_problem("alice", credential, time.time())
    renamed = Authenticator({"tok-alice-1": "mallory"})
    assert "now names principal 'mallory'" in renamed.credential_problem(
        "alice", credential, time.time()
    )


def test_a_jwt_grants_until_its_exp_exactly_and_only_under_its_secret():
    auth = Authenticator(jwt_secret=SECRET, leeway_s=30)
    principal = auth.authenticate(issue_token(SECRET, "carol", ttl_s=60))
    credential = principal.credential
    assert credential is not None and credential.kind == "jwt"
    assert credential.expires_at is not None
    assert auth.credential_problem("carol", credential, credential.expires_at - 0.001) is None
    expired = auth.credential_problem("carol", credential, credential.expires_at)
    assert expired is not None and expired.startswith("the JWT that made it expired at")
    other = Authenticator(jwt_secret=SECRET + "-rotated")
    assert "EXAI_JWT_SECRET" in other.credential_problem("carol", credential, time.time())


def test_an_open_daemon_grants_until_it_has_tokens():
    open_daemon = Authenticator()
    credential = open_daemon.authenticate(None).credential
    assert credential == Credential("none", "open")
    assert open_daemon.credential_problem("anonymous", credential, time.time()) is None
    closed = Authenticator({"tok": "default"})
    assert "had no token" in closed.credential_problem("anonymous", credential, time.time())


def test_nothing_recorded_is_nothing_to_check():
    assert Authenticator({"tok": "x"}).credential_problem("x", None, time.time()) is None


def test_two_tokens_of_one_principal_are_one_principal():
    auth = Authenticator({"tok-1": "dora", "tok-2": "dora"})
    first, second = auth.authenticate("tok-1"), auth.authenticate("tok-2")
    assert first == second and first.credential != second.credential
