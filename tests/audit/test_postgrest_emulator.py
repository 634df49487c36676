"""The PostgREST test fixture answers like PostgREST where the sink depends on it."""

from __future__ import annotations

import httpx
import pytest

from exai.emulators.postgrest import PostgrestEmulator

from .conftest import SERVICE_KEY

HEADERS = {"apikey": SERVICE_KEY, "Authorization": f"Bearer {SERVICE_KEY}"}
ROW = {"event_id": "e1", "kind": "k", "ts": "2025-01-01T00:00:00+00:00", "instance_id": "i"}


def post(emulator: PostgrestEmulator, body: object, prefer: str = "", table: str = "audit_events",
         query: str = "", headers: dict[str, str] | None = None) -> httpx.Response:  # fmt: skip
    return httpx.post(
        f"{emulator.url}/rest/v1/{table}{query}", json=body,
        headers={**(HEADERS if headers is None else headers), "Prefer": prefer}, timeout=5,
    )  # fmt: skip


def test_duplicates_without_resolution_are_409_and_store_nothing(postgrest) -> None:
    assert post(postgrest, ROW).status_code == 201
    answer = post(postgrest, [{**ROW, "event_id": "e2"}, ROW])
    assert answer.status_code == 409 and answer.json()["code"] == "23505"
    assert set(answer.json()) == {"code", "message", "details", "hint"}
    assert [r["event_id"] for r in postgrest.rows("audit_events")] == ["e1"]


def test_resolutions_ignore_or_merge_and_representation_returns_rows(postgrest) -> None:
    post(postgrest, ROW)
    ignored = post(postgrest, {**ROW, "kind": "new"}, "return=representation,"
                   "resolution=ignore-duplicates", query="?on_conflict=event_id")  # fmt: skip
    assert ignored.status_code == 201 and ignored.json() == []
    merged = post(postgrest, {**ROW, "kind": "new"}, "resolution=merge-duplicates")
    assert merged.status_code == 201 and merged.content == b""
    assert "resolution=merge-duplicates" in merged.headers["preference-applied"]
    assert postgrest.rows("audit_events")[0]["kind"] == "new"


@pytest.mark.parametrize(
    ("body", "table", "query", "status", "code"),
    [
        ({**ROW, "nope": 1}, "audit_events", "", 400, "PGRST204"),
        (ROW, "missing", "", 404, "PGRST205"),
        (ROW, "audit_events", "?on_conflict=kind", 400, "42P10"),
        ({**ROW, "kind": None}, "audit_events", "", 400, "23502"),
        ([ROW, {"event_id": "x"}], "audit_events", "", 400, "PGRST102"),
    ],
)
def test_errors_carry_postgrest_codes(postgrest, body, table, query, status, code) -> None:
    answer = post(postgrest, body, table=table, query=query)
    assert (answer.status_code, answer.json()["code"]) == (status, code)


def test_a_wrong_api_key_is_401(postgrest) -> None:
    assert post(postgrest, ROW, headers={"apikey": "wrong"}).status_code == 401


def test_switches_fail_reject_refuse_and_hang(postgrest) -> None:
    postgrest.fail(503, times=1)
    assert post(postgrest, ROW).status_code == 503
    postgrest.reject(422, code="PGRST999", match=lambda rows: rows[0]["event_id"] == "bad")
    assert post(postgrest, {**ROW, "event_id": "bad"}).json()["code"] == "PGRST999"
    assert post(postgrest, ROW).status_code == 201
    postgrest.refuse()
    with pytest.raises(httpx.ConnectError):
        post(postgrest, ROW)
    postgrest.healthy()
    postgrest.hang()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{postgrest.url}/rest/v1/audit_events", json=ROW, headers=HEADERS,
                   timeout=httpx.Timeout(5, read=0.2))  # fmt: skip
    postgrest.healthy()
    assert post(postgrest, {**ROW, "event_id": "e3"}).status_code == 201
    assert [r.status for r in postgrest.writes()][:3] == [503, 422, 201]
