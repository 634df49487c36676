"""The one SQLite migration runner and script splitter every room uses, and the one
decision of a backend from a URL's scheme."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from exai.errors import ValidationError_
from exai.settings import Settings
from exai.sqldb.executor import ThreadConnection, drive
from exai.sqldb.migrations import apply_sqlite_migrations, sqlite_statements
from exai.store.backends import backend_of, room_url

# A trigger whose body holds several statements and a CASE ... END, a string and a
# quoted identifier holding ";", and comments holding ";" and "END;".
SCRIPT = """
CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, "odd;name" TEXT);
-- a comment; with END; in it
CREATE TABLE log (note_id INTEGER, what TEXT, size TEXT);
CREATE TRIGGER notes_ai AFTER INSERT ON notes BEGIN
    INSERT INTO log VALUES (new.id, 'inserted; END;', NULL);
    UPDATE log SET size = CASE WHEN length(new.body) > 3 THEN 'long' ELSE 'short' END
        WHERE note_id = new.id;
END;
/* a block comment; still a comment */
INSERT INTO notes (body, "odd;name") VALUES ('a;b', 'x;y')
"""


def test_a_script_splits_at_statement_ends_only() -> None:
    statements = sqlite_statements(SCRIPT)
    assert len(statements) == 4
    assert statements[2].startswith("CREATE TRIGGER notes_ai") and statements[2].endswith("END")
    assert "CASE WHEN" in statements[2]
    assert statements[3].endswith("VALUES ('a;b', 'x;y')")  # the last needs no ";"


def test_the_statements_run_and_the_trigger_fires() -> None:
    db = sqlite3.connect(":memory:")
    for statement in sqlite_statements(SCRIPT):
        db.execute(statement)
    assert db.execute('SELECT body, "odd;name" FROM notes').fetchall() == [("a;b", "x;y")]
    assert db.execute("SELECT note_id, what, size FROM log").fetchall() == [
        (1, "inserted; END;", "short")
    ]


@pytest.mark.parametrize(
    "broken",
    [
        "CREATE TRIGGER t AFTER INSERT ON n BEGIN SELECT 1;",  # no END;
        "INSERT INTO n VALUES ('never closed; )",
    ],
)
def test_an_unterminated_statement_is_refused(broken: str) -> None:
    with pytest.raises(ValueError, match="unterminated"):
        sqlite_statements("CREATE TABLE n (x);\n" + broken)


def _migrate(db: sqlite3.Connection, migrations: list[tuple[int, str]]) -> int:
    return drive(apply_sqlite_migrations(ThreadConnection(db), "room_version", migrations))


def test_the_runner_applies_only_what_is_missing_and_records_it() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    assert _migrate(db, [(1, SCRIPT)]) == 1
    later = [(1, SCRIPT), (2, "ALTER TABLE notes ADD COLUMN tag TEXT"), (3, "")]
    assert _migrate(db, later) == 3
    assert _migrate(db, later) == 3  # nothing runs twice: script 1's insert would repeat
    assert db.execute("SELECT COUNT(*) FROM notes").fetchone() == (1,)
    assert [r[0] for r in db.execute("SELECT version FROM room_version ORDER BY version")] == [
        1, 2, 3,
    ]  # fmt: skip


def test_a_failing_script_leaves_nothing_when_run_in_a_transaction() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute("BEGIN")
    with pytest.raises(sqlite3.OperationalError):
        _migrate(db, [(1, "CREATE TABLE a (x); INSERT INTO missing VALUES (1)")])
    db.execute("ROLLBACK")
    tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    assert tables == []


def test_a_version_table_name_is_checked() -> None:
    db = sqlite3.connect(":memory:")
    with pytest.raises(ValueError, match="plain lower-case"):
        drive(apply_sqlite_migrations(ThreadConnection(db), "v; DROP TABLE x", []))


@pytest.mark.parametrize(
    ("url", "backend"),
    [
        ("sqlite:///rel/x.db", "sqlite"),
        ("SQLITE:////abs/x.db", "sqlite"),
        ("postgresql://u@h/db", "postgres"),
        ("postgres://u@h/db?sslmode=require", "postgres"),
    ],
)
def test_the_backend_is_decided_by_the_scheme(url: str, backend: str) -> None:
    assert backend_of(url, "EXAI_X_URL") == backend


@pytest.mark.parametrize("url", ["mysql://h/db", "/plain/path.db", "sqlite:/one-slash", ""])
def test_another_scheme_is_refused_naming_the_setting(url: str) -> None:
    with pytest.raises(ValidationError_, match="EXAI_JOBS_URL must start with sqlite:///"):
        backend_of(url, "EXAI_JOBS_URL")


def test_a_room_follows_the_stores_postgres_and_otherwise_keeps_its_own_file(
    tmp_path: Path,
) -> None:
    def url(store_url: str | None, own: str | None = None) -> str:
        settings = Settings(_env_file=None, data_dir=tmp_path, store_url=store_url)  # type: ignore[call-arg]
        return room_url(own, settings, tmp_path / "room.sqlite3")

    assert url(None) == f"sqlite:///{tmp_path}/room.sqlite3"
    assert url("sqlite:///c.db") == f"sqlite:///{tmp_path}/room.sqlite3"
    assert url("postgres://u@h/db") == "postgres://u@h/db"
    assert url("postgres://u@h/db", own=" sqlite:///mine.db ") == "sqlite:///mine.db"
    with pytest.raises(ValidationError_, match="EXAI_STORE_URL"):
        url("mysql://h/db")
