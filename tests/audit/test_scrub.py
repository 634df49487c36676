"""Secrets never survive scrubbing: by field name, by configured value, by shape."""

from __future__ import annotations

from pydantic import SecretStr

from exai.audit.scrub import MASK, Scrubber, secrets_from_settings

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXZhbHVl"


def test_sensitive_names_are_masked_but_counts_are_kept() -> None:
    out = Scrubber().scrub(
        {"api_key": "abc", "Authorization": "Basic xyz", "headers": {"x-api-key": "k"},
         "password": ["p"], "prompt_tokens": 12, "completion_tokens": 3, "tool": "chat"}
    )  # fmt: skip
    assert out["api_key"] == MASK and out["Authorization"] == MASK and out["password"] == MASK
    assert out["headers"] == {"x-api-key": MASK}
    assert (out["prompt_tokens"], out["completion_tokens"], out["tool"]) == (12, 3, "chat")


def test_configured_secret_values_and_credential_shapes_are_masked_anywhere() -> None:
    scrubber = Scrubber(["s3cr3t-value-42"])
    out = scrubber.scrub(
        {"message": {"content": f"use s3cr3t-value-42 and {JWT} or Bearer abcdefghijkl"},
         "list": ("s3cr3t-value-42", SecretStr("x")), "note": "sk-abcdefghijklmnop1234"}
    )  # fmt: skip
    text = repr(out)
    assert "s3cr3t-value-42" not in text and JWT not in text and "abcdefghijkl" not in text
    assert "sk-abcdefghijklmnop1234" not in text
    assert out["list"] == [MASK, MASK]


def test_scrub_returns_a_private_copy() -> None:
    message = {"content": "hello"}
    out = Scrubber().scrub({"message": message})
    message["content"] = "changed"
    assert out["message"]["content"] == "hello"


def test_secrets_from_settings_include_tokens_keys_and_url_passwords(make_settings) -> None:
    settings = make_settings(
        ws_tokens="alice=tok-alice-123,bob=tok-bob-456",
        kimi_api_key="kimi-key-789",
        audit_postgres_url="postgresql://u:pg-pass-000@db/x",
        store_url="postgresql://u:store-pass-111@db/x",
    )
    found = set(secrets_from_settings(settings))
    assert {
        "tok-alice-123",
        "tok-bob-456",
        "kimi-key-789",
        "pg-pass-000",
        "store-pass-111",
    } <= found


def test_nul_characters_are_replaced_because_postgres_rejects_them() -> None:
    assert Scrubber().scrub({"message": "a\x00b"}) == {"message": "a\ufffdb"}


def test_credentials_in_any_url_are_masked_even_when_not_configured() -> None:
    # A bridged server's URL, say: not a setting, so not among the known secrets.
    out = Scrubber().scrub({"error": "ConnectError for https://bot:unlisted-pw@mcp.example/x"})
    assert out == {"error": f"ConnectError for https://bot:{MASK}@mcp.example/x"}
