"""The memory tables, their migrations for SQLite and Postgres, and how a row reads back.

Memory keeps its own versions, in its own table (``memory_schema_version``),
apart from the conversation store's ``schema_version``: the two schemas evolve
separately, and the conversation store's runner applies only numbers above the
highest it has seen, so sharing its numbering would tie memory to every other
change there. Postgres scripts name their schema ``{s}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from exai.memory.base import Memory

__all__ = ["MEMORY_COLUMNS", "POSTGRES_MIGRATIONS", "SQLITE_MIGRATIONS", "decode_memory"]

SQLITE_MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE memories (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            owner TEXT NOT NULL,
            project TEXT,
            type TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            source TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            embedding_model TEXT,
            dimension INTEGER,
            embedding BLOB,
            owner_key TEXT NOT NULL,
            UNIQUE (owner, content_hash)
        );
        CREATE INDEX memories_owner_updated ON memories(owner, updated_at);
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            content, tags, owner_key, content='memories', content_rowid='rowid',
            tokenize='porter unicode61'
        );
        CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts(rowid, content, tags, owner_key)
            VALUES (new.rowid, new.content, new.tags, new.owner_key);
        END;
        CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, tags, owner_key)
            VALUES ('delete', old.rowid, old.content, old.tags, old.owner_key);
        END;
        CREATE TRIGGER memories_au AFTER UPDATE OF content, tags ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, tags, owner_key)
            VALUES ('delete', old.rowid, old.content, old.tags, old.owner_key);
            INSERT INTO memories_fts(rowid, content, tags, owner_key)
            VALUES (new.rowid, new.content, new.tags, new.owner_key);
        END;
        CREATE TABLE memory_extraction_queue (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            owner TEXT NOT NULL,
            text TEXT NOT NULL,
            thread_id TEXT,
            project TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            leased_until REAL NOT NULL DEFAULT 0,
            last_error TEXT,
            created_at REAL NOT NULL
        );
        """,
    ),
    (
        2,
        # Every change of a memory's vector, by whoever writes the file: the resident
        # vectors (exai.memory.resident) of each process catch up from it before a
        # search. Kept to about the last 100,000; a process further behind reloads.
        """
        CREATE TABLE memory_vector_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            owner TEXT NOT NULL,
            memory_rowid INTEGER NOT NULL
        );
        CREATE INDEX memory_vector_changes_owner ON memory_vector_changes(owner, seq);
        CREATE TRIGGER memories_vector_ai AFTER INSERT ON memories
        WHEN new.embedding IS NOT NULL BEGIN
            INSERT INTO memory_vector_changes(owner, memory_rowid) VALUES (new.owner, new.rowid);
        END;
        CREATE TRIGGER memories_vector_ad AFTER DELETE ON memories
        WHEN old.embedding IS NOT NULL BEGIN
            INSERT INTO memory_vector_changes(owner, memory_rowid) VALUES (old.owner, old.rowid);
        END;
        CREATE TRIGGER memories_vector_au AFTER UPDATE OF embedding, embedding_model, dimension
        ON memories BEGIN
            INSERT INTO memory_vector_changes(owner, memory_rowid) VALUES (new.owner, new.rowid);
        END;
        CREATE TRIGGER memory_vector_changes_trim AFTER INSERT ON memory_vector_changes
        WHEN new.seq % 1000 = 0 BEGIN
            DELETE FROM memory_vector_changes WHERE seq <= new.seq - 100000;
        END;
        """,
    ),
    (
        3,
        # Whether a row is the owner's, answered from a narrow index (owner, rowid):
        # a keyword search that ranks every principal's matches keeps the owner's
        # (exai.memory.sqlite_terms), and reading the rows themselves for that, a
        # kilobyte of vector each, was slower than the ranking.
        """
        CREATE INDEX memories_owner_rowid ON memories(owner);
        """,
    ),
]

POSTGRES_MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE {s}.memories (
            id text PRIMARY KEY,
            owner text NOT NULL,
            project text,
            type text NOT NULL,
            content text NOT NULL,
            tags jsonb NOT NULL,
            content_hash text NOT NULL,
            source text NOT NULL,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            embedding_model text,
            dimension integer,
            embedding_array real[],
            tsv tsvector GENERATED ALWAYS AS
                (to_tsvector('english', content || ' ' || tags::text)) STORED,
            UNIQUE (owner, content_hash)
        );
        CREATE INDEX memories_owner_updated ON {s}.memories(owner, updated_at);
        CREATE INDEX memories_tsv ON {s}.memories USING gin(tsv);
        CREATE TABLE {s}.memory_extraction_queue (
            id bigserial PRIMARY KEY,
            owner text NOT NULL,
            text text NOT NULL,
            thread_id text,
            project text,
            attempts integer NOT NULL DEFAULT 0,
            leased_until double precision NOT NULL DEFAULT 0,
            last_error text,
            created_at double precision NOT NULL
        );
        """,
    ),
    (
        2,
        # The words of each memory apart from its vectors, for keyword search: a
        # memory's row carries two copies of its vector (about 2 KB), so ranking a
        # few hundred matches read as many heap pages; this table's rows are a
        # tenth of that and stay in shared buffers. A trigger keeps it in step. No
        # pending list (fastupdate): after a bulk load every search read its 15,000
        # unsorted entries until a vacuum merged them (5 ms a query at 100,000).
        """
        CREATE TABLE {s}.memory_terms (
            id text PRIMARY KEY REFERENCES {s}.memories(id) ON DELETE CASCADE,
            owner text NOT NULL,
            tsv tsvector NOT NULL
        );
        INSERT INTO {s}.memory_terms (id, owner, tsv) SELECT id, owner, tsv FROM {s}.memories;
        CREATE INDEX memory_terms_tsv ON {s}.memory_terms USING gin(tsv) WITH (fastupdate = off);
        DROP INDEX {s}.memories_tsv;
        CREATE FUNCTION {s}.memory_terms_sync() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO {s}.memory_terms (id, owner, tsv) VALUES (NEW.id, NEW.owner, NEW.tsv)
            ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner, tsv = EXCLUDED.tsv;
            RETURN NULL;
        END $$;
        CREATE TRIGGER memory_terms_sync AFTER INSERT OR UPDATE OF content, tags, owner
            ON {s}.memories FOR EACH ROW EXECUTE FUNCTION {s}.memory_terms_sync();
        ANALYZE {s}.memory_terms;
        """,
    ),
]


# The columns a Memory is read from, in the order decode_memory expects; the same on
# both backends (tags are JSON text in SQLite and jsonb, read as text, in Postgres).
MEMORY_COLUMNS = (
    "id, owner, content, type, tags, project, content_hash, source, created_at, updated_at,"
    " embedding_model, dimension"
)


def decode_memory(row: Sequence[Any]) -> Memory:
    """A :class:`Memory` from a row of :data:`MEMORY_COLUMNS`."""
    return Memory(
        id=row[0], owner=row[1], content=row[2], type=row[3], tags=json.loads(row[4]),
        project=row[5], content_hash=row[6], source=row[7], created_at=row[8],
        updated_at=row[9], embedding_model=row[10], dimension=row[11],
    )  # fmt: skip
