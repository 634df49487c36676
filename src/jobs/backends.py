"""Choosing and opening the job store.

``EXAI_JOBS_URL`` names it; unset, jobs follow the conversation store: SQLite in
``jobs.sqlite3`` beside it, or the same Postgres database (and schema) when
``EXAI_STORE_URL`` is Postgres, so that daemons sharing conversations share
jobs, and each fire runs on one of them.
"""

from __future__ import annotations

from exai.jobs.base import JobStore
from exai.settings import Settings
from exai.store.backends import backend_of, room_url, sqlite_path_from_url

__all__ = ["jobs_url", "open_job_store"]


def jobs_url(settings: Settings) -> str:
    return room_url(settings.jobs_url, settings, settings.jobs_sqlite_path)


async def open_job_store(settings: Settings, *, schema: str = "exai") -> JobStore:
    url = jobs_url(settings)
    if backend_of(url, "EXAI_JOBS_URL") == "sqlite":
        from exai.jobs.sqlite import SqliteJobStore

        return await SqliteJobStore.open(sqlite_path_from_url(url))
    from exai.jobs.postgres import PostgresJobStore

    return await PostgresJobStore.open(url, schema=schema)
