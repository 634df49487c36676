"""What ``exai keys`` and ``exai limits`` change is in the audit trail, as a daemon's
admin API records it: the events are in the local outbox the daemons' audit writer
ships, naming the key and the operator, never the key's secret."""

from __future__ import annotations

import getpass
import json

import pytest

from exai.audit.outbox import AuditOutbox
from exai.cli.main import main
from exai.settings import load_settings


def _events(tmp_path) -> list[dict]:
    settings = load_settings()
    outbox = AuditOutbox(settings.outbox_path, max_events=1000)
    outbox.open()
    try:
        return [row.event() for row in outbox.head(1000)]
    finally:
        outbox.close()


def test_operator_commands_leave_audit_events_without_the_secret(
    tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXAI_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("EXAI_STORE_URL", f"sqlite:///{tmp_path / 'keys.sqlite3'}")
    monkeypatch.setenv("EXAI_AUDIT_ENABLED", "true")
    assert main(["keys", "create", "--principal", "bob", "--rate", "60/min"]) == 0
    token = capsys.readouterr().out.strip()
    key_id, secret = token.split("_")[1], token.split("_", 2)[2]
    assert main(["keys", "revoke", key_id]) == 0
    assert main(["keys", "revoke", "--jti", "jwt-7", "--note", "laptop lost"]) == 0
    assert main(["limits", "set", "--principal", "bob", "--rate", "120/min"]) == 0
    assert main(["limits", "clear", "--principal", "bob"]) == 0
    capsys.readouterr()

    events = _events(tmp_path)
    kinds = [e["kind"] for e in events]
    assert kinds == ["key.created", "key.revoked", "key.jti_revoked", "limits_changed",
                     "limits_changed"]  # fmt: skip
    assert [e["principal"] for e in events[:3]] == [f"cli:{getpass.getuser()}"] * 3
    assert [e["by"] for e in events[3:]] == [getpass.getuser()] * 2
    assert events[0]["key_id"] == key_id and events[0]["key_principal"] == "bob"
    assert events[3]["limits"]["rate_per_min"] == 120 and events[4]["limits"] is None
    assert all("-cli-" in e["instance_id"] for e in events)
    assert secret not in json.dumps(events)


def test_with_the_audit_trail_off_no_outbox_is_written(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXAI_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("EXAI_STORE_URL", f"sqlite:///{tmp_path / 'keys.sqlite3'}")
    monkeypatch.setenv("EXAI_AUDIT_ENABLED", "false")
    assert main(["keys", "create", "--principal", "bob"]) == 0
    assert not load_settings().outbox_path.exists()
