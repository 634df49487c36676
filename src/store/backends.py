"""Choosing and opening the conversation store named by ``EXAI_STORE_URL``.

* unset: SQLite at ``settings.sqlite_path`` (under ``EXAI_DATA_DIR``);
* ``sqlite:///relative/path`` or ``sqlite:////absolute/path``: SQLite there;
* ``postgresql://...`` or ``postgres://...``: Postgres, for several daemons
  sharing one database. A Supabase connection string works as given, including
  ``?sslmode=require``; its transaction pooler (port 6543, or ``pgbouncer=true``)
  gets a driver without prepared-statement caching.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from exai.errors import ValidationError_
from exai.settings import Settings
from exai.store.base import ConversationStore, StoreLimits

__all__ = ["Backend", "backend_of", "open_store", "room_url", "sqlite_path_from_url"]

Backend = Literal["sqlite", "postgres"]


def backend_of(url: str, setting: str) -> Backend:
    """The backend ``url``'s scheme names; anything else is refused, naming ``setting``.

    ``sqlite:///path`` is SQLite; ``postgresql://`` and ``postgres://`` (both
    spellings libpq accepts) are Postgres. The conversation store, memory and jobs
    all decide here.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "sqlite":
        return "sqlite"
    if scheme in ("postgresql", "postgres"):
        return "postgres"
    raise ValidationError_(
        f"{setting} must start with sqlite:///, postgresql:// or postgres:// "
        f"(got scheme {scheme or 'none'!r})"
    )


def sqlite_path_from_url(url: str) -> Path:
    """``sqlite:///a/b`` -> ``a/b`` (relative); ``sqlite:////a/b`` -> ``/a/b``."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise ValidationError_(f"a sqlite URL has no host: {url!r}; use sqlite:///path")
    path = unquote(parts.path)
    path = path[1:] if path.startswith("/") else path
    if not path:
        raise ValidationError_(f"the sqlite URL {url!r} names no file")
    return Path(path).expanduser()


def room_url(own: str | None, settings: Settings, sqlite_path: Path) -> str:
    """Where a room with tables of its own (memory, jobs) keeps them: its own URL if
    set, else the conversation store's Postgres when there is one (so several
    daemons share it too), else its own SQLite file."""
    if own:
        return own.strip()
    store = (settings.store_url or "").strip()
    if store and backend_of(store, "EXAI_STORE_URL") == "postgres":
        return store
    return f"sqlite:///{sqlite_path}"


async def open_store(settings: Settings, *, schema: str = "exai") -> ConversationStore:
    """Open the store ``settings.store_url`` names, its schema brought up to date.

    ``schema`` is the Postgres schema that holds the tables.
    """
    limits = StoreLimits.from_settings(settings)
    url = (settings.store_url or "").strip()
    if not url:
        from exai.store.sqlite import SqliteStore

        return await SqliteStore.open(settings.sqlite_path, limits)
    if backend_of(url, "EXAI_STORE_URL") == "sqlite":
        from exai.store.sqlite import SqliteStore

        return await SqliteStore.open(sqlite_path_from_url(url), limits)
    from exai.store.postgres import PostgresStore

    return await PostgresStore.open(url, limits, schema=schema)
