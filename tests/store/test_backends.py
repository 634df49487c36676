"""Choosing the backend from EXAI_STORE_URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from exai.emulators.postgres import TempPostgres
from exai.errors import ValidationError_
from exai.settings import Settings
from exai.sqldb.postgres import driver_options
from exai.store import open_store
from exai.store.backends import sqlite_path_from_url
from exai.store.postgres import PostgresStore
from exai.store.sqlite import SqliteStore


def settings(tmp_path: Path, url: str | None) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", store_url=url)  # type: ignore[call-arg]


async def test_no_url_means_sqlite_in_the_data_dir(tmp_path: Path) -> None:
    store = await open_store(settings(tmp_path, None))
    try:
        assert isinstance(store, SqliteStore) and store.path == tmp_path / "data" / (
            "conversations.sqlite3")  # fmt: skip
    finally:
        await store.aclose()


async def test_sqlite_urls(tmp_path: Path) -> None:
    assert sqlite_path_from_url("sqlite:///rel/c.db") == Path("rel/c.db")
    assert sqlite_path_from_url("sqlite:////abs/c.db") == Path("/abs/c.db")
    store = await open_store(settings(tmp_path, f"sqlite:///{tmp_path}/x/c.db"))
    try:
        assert isinstance(store, SqliteStore) and store.path == tmp_path / "x" / "c.db"
    finally:
        await store.aclose()
    with pytest.raises(ValidationError_, match="EXAI_STORE_URL"):
        await open_store(settings(tmp_path, "mysql://host/db"))


async def test_postgres_urls_with_sslmode_and_pooler_flags(
    tmp_path: Path, postgres_server: TempPostgres
) -> None:
    url = postgres_server.create_database("backend_choice")
    for variant in (url + "?sslmode=disable", url.replace("postgresql://", "postgres://")
                    + "?sslmode=prefer&pgbouncer=true"):  # fmt: skip
        store = await open_store(settings(tmp_path, variant))
        try:
            assert isinstance(store, PostgresStore) and store.schema == "exai"
            thread = await store.create_thread("alice")
            assert (await store.get_thread(thread.id, "alice")).owner == "alice"
        finally:
            await store.aclose()


def test_supabase_connection_strings_keep_ssl_and_drop_the_statement_cache_when_pooled() -> None:
    direct = "postgresql://postgres:pw@db.abcd.supabase.co:5432/postgres?sslmode=require"
    assert driver_options(direct) == (direct, {})
    pooled = ("postgres://postgres.abcd:pw@aws-0-eu-central-1.pooler.supabase.com:6543/postgres"
              "?sslmode=require&pgbouncer=true")  # fmt: skip
    dsn, options = driver_options(pooled)
    assert dsn == ("postgresql://postgres.abcd:pw@aws-0-eu-central-1.pooler.supabase.com:6543/"
                   "postgres?sslmode=require")  # fmt: skip
    assert options == {"statement_cache_size": 0}
