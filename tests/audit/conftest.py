"""Fixtures for the audit trail tests: settings in a temp dir and a PostgREST emulator."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from exai.audit.events import COLUMNS
from exai.emulators.postgrest import PostgrestEmulator, Table
from exai.settings import Settings

SERVICE_KEY = "sb-service-role-key-for-tests-0123456789"
AUDIT_TABLE = Table(
    columns=(*COLUMNS, "data", "received_at"),
    key=("event_id",),
    required=frozenset({"event_id", "kind", "ts", "instance_id"}),
)

SettingsFactory = Callable[..., Settings]


@pytest.fixture
def postgrest() -> Iterator[PostgrestEmulator]:
    emulator = PostgrestEmulator({"audit_events": AUDIT_TABLE}, api_key=SERVICE_KEY)
    emulator.start()
    yield emulator
    emulator.stop()


@pytest.fixture
def make_settings(tmp_path: Path) -> SettingsFactory:
    """Settings with fast intervals and a private data dir; keyword overrides win."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "data_dir": tmp_path / "data",
            "audit_enabled": True,
            "audit_sink": "none",
            "audit_flush_interval_s": 0.01,
            "audit_ship_interval_s": 0.01,
            "audit_batch_size": 50,
        }
        values.update(overrides)
        return Settings(_env_file=None, **values)  # type: ignore[call-arg]

    return make


@pytest.fixture
def supabase_settings(
    make_settings: SettingsFactory, postgrest: PostgrestEmulator
) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        return make_settings(
            audit_sink="supabase",
            supabase_url=postgrest.url,
            supabase_service_role_key=SERVICE_KEY,
            **overrides,
        )

    return make
