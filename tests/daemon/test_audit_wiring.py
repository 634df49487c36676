"""The daemon reports connections, calls and refused hellos to the audit trail."""

from __future__ import annotations

import json

import pytest

from exai.client import HelloRefused
from tests.conftest import make_settings, running_daemon

SECRET_TOKEN = "tok-very-secret-3b1f77"


async def test_calls_and_connections_become_audit_events(tmp_path, client_factory):
    sink_file = tmp_path / "audit.jsonl"
    settings = make_settings(tmp_path, audit_enabled=True, audit_sink="jsonl",
                             audit_jsonl_path=sink_file, ws_tokens=f"alice={SECRET_TOKEN}",
                             audit_ship_interval_s=0.1)  # fmt: skip
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon, SECRET_TOKEN, client_name="auditor")
        await client.call("echo", {"text": "hello", "api_key": "nope"})
        await client.call("echo", {"text": "audited"})
        await client.call("echo", {"text": "audited while waiting", "delay_s": 0.05})
        await client.call("missing_tool", {})
        with pytest.raises(HelloRefused):
            await client_factory(daemon, "wrong-token")
        await client.close()
    text = sink_file.read_text()
    events = [json.loads(line) for line in text.splitlines()]
    kinds = [e["kind"] for e in events]
    for kind in ("connection_opened", "call_started", "call_finished", "connection_closed",
                 "auth_failed"):  # fmt: skip
        assert kind in kinds, kinds
    finished = [e for e in events if e["kind"] == "call_finished"]
    assert sorted((e["tool"], e["status"], e["error_code"]) for e in finished) == [
        ("echo", "error", "VALIDATION_ERROR"), ("echo", "ok", None), ("echo", "ok", None),
        ("missing_tool", "error", "TOOL_NOT_FOUND"),
    ]  # fmt: skip
    # A call is on record as started once it waits; one answered in its first step is
    # recorded by its call_finished alone. Either way its arguments' digest is recorded once.
    started = [e for e in events if e["kind"] == "call_started"]
    assert len(started) == 1 and len(started[0]["args_digest"]) == 64
    ok = [e for e in finished if e["status"] == "ok"]
    waited = next(e for e in ok if e["request_id"] == started[0]["request_id"])
    at_once = next(e for e in ok if e is not waited)
    assert "args_digest" not in waited and len(at_once["args_digest"]) == 64
    assert "audited" not in text  # arguments are digested, never stored
    assert SECRET_TOKEN not in text and "wrong-token" not in text
    assert len({e["event_id"] for e in events}) == len(events)
    opened = next(e for e in events if e["kind"] == "connection_opened")
    assert opened["principal"] == "alice" and opened["client_name"] == "auditor"
