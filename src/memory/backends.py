"""Choosing and opening the memory store, and the service around it.

``EXAI_MEMORY_URL`` names the store; unset, memories follow the conversation
store: SQLite in ``memory.sqlite3`` beside it, or the same Postgres database
(and schema) when ``EXAI_STORE_URL`` is Postgres, so that daemons sharing
conversations share memories too.
"""

from __future__ import annotations

from collections.abc import Callable

from exai.memory.base import MemoryStore
from exai.memory.embeddings import load_chain
from exai.memory.service import MemoryConfig, MemoryService
from exai.settings import Settings
from exai.store.backends import backend_of, room_url, sqlite_path_from_url

__all__ = ["memory_url", "open_memory", "open_memory_store"]


def memory_url(settings: Settings) -> str:
    return room_url(settings.memory_url, settings, settings.memory_sqlite_path)


async def open_memory_store(settings: Settings, *, schema: str = "exai") -> MemoryStore:
    url = memory_url(settings)
    if backend_of(url, "EXAI_MEMORY_URL") == "sqlite":
        from exai.memory.sqlite import SqliteMemoryStore

        return await SqliteMemoryStore.open(
            sqlite_path_from_url(url), sqlite_vec=settings.memory_sqlite_vec
        )
    from exai.memory.postgres import PostgresMemoryStore

    return await PostgresMemoryStore.open(url, schema=schema, pgvector=settings.memory_pgvector)


async def open_memory(
    settings: Settings, emit: Callable[..., None] | None = None, *, schema: str = "exai"
) -> MemoryService:
    store = await open_memory_store(settings, schema=schema)
    return MemoryService(store, load_chain(settings), MemoryConfig.from_settings(settings), emit)
