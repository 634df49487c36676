"""A known secret handed to emit, by name or inside any value, is stored nowhere."""

from __future__ import annotations

import json

from exai.audit import AuditTrail, SinkUnavailable
from exai.emulators.postgrest import PostgrestEmulator

from .conftest import SERVICE_KEY
from .helpers import stored_ids, wait_until

TOKEN = "exai-ws-token-K9q2-known-secret"
PROVIDER_KEY = "kimi-provider-key-Zx81-known"
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSJ9.mZ0Cq2Yt3tZKxwQ-known"


async def test_known_secrets_never_reach_the_outbox_or_the_sink(
    supabase_settings, postgrest: PostgrestEmulator
) -> None:
    settings = supabase_settings(ws_token=TOKEN, kimi_api_key=PROVIDER_KEY)
    trail = AuditTrail(settings)
    await trail.start()
    trail.emit("connection_opened", session_id="s", principal="alice", token=TOKEN,
               peer="127.0.0.1", headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
    trail.emit("auth_failed", peer="127.0.0.1", reason=f"bad token {TOKEN}", jwt=JWT)
    trail.emit("conversation_turn", thread_id="t", role="user",
               message={"content": f"my key is {PROVIDER_KEY}, my session {JWT}"})  # fmt: skip
    trail.emit("provider_request", provider="kimi", model="k2", api_key=PROVIDER_KEY,
               prompt_tokens=10, completion_tokens=2, error_code=None,
               details=[SERVICE_KEY, {"nested": {"password": "hunter22"}}])  # fmt: skip
    await wait_until(lambda: len(stored_ids(postgrest)) == 4)
    await trail.stop()

    sent = json.dumps([write.body for write in postgrest.writes()])
    stored = json.dumps(postgrest.rows("audit_events"))
    on_disk = b"".join(path.read_bytes() for path in settings.data_dir.iterdir() if path.is_file())
    for secret in (TOKEN, PROVIDER_KEY, JWT, SERVICE_KEY, "hunter22"):
        assert secret not in sent and secret not in stored
        assert secret.encode() not in on_disk
    assert '"prompt_tokens": 10' in stored


def test_a_sink_failure_quoting_its_url_keeps_the_password_out() -> None:
    # What the shipper records as last_error, the outbox keeps, and `exai audit` shows.
    failure = SinkUnavailable("ConnectError for https://svc:pw-in-url@db.example/rest/v1")
    assert str(failure) == "ConnectError for https://svc:****@db.example/rest/v1"
