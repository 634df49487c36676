"""Finding a principal's threads by what they say: title and message text.

:class:`ThreadSearch` is the part of :class:`~exai.store.sql.SqlStore` that the
console's thread list uses. A plain case-insensitive substring match, written
once for both backends (``LOWER(...) LIKE LOWER(?)``, wildcards in the query
escaped), over the owner's live threads only: it answers "where did I talk
about X" for one person's threads, not a ranked search over everyone's.
"""

from __future__ import annotations

from exai.store.base import Thread
from exai.store.rows import THREAD_COLUMNS, decode_thread
from exai.store.sql_base import SqlBase

__all__ = ["ThreadSearch", "like_pattern"]

_COLUMNS = ", ".join(f"t.{c.strip()}" for c in THREAD_COLUMNS.split(","))


def like_pattern(text: str) -> str:
    """``text`` as a LIKE pattern that matches it anywhere, its own ``%`` and ``_`` literal."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class ThreadSearch(SqlBase):
    """Mixed into :class:`~exai.store.sql.SqlStore` with the other table groups."""

    async def search_threads(
        self, owner: str, text: str, *, limit: int = 50, offset: int = 0
    ) -> list[Thread]:
        """The owner's live threads whose title or any message contains ``text``,
        most recently updated first. A message's text is its content, and what it
        holds besides (a list of parts, as agents send their prompts; tool calls and
        their arguments), searched as its stored JSON."""
        pattern = like_pattern(text.strip().lower())
        sql = (
            f"SELECT {_COLUMNS} FROM {{p}}threads t"
            " WHERE t.owner = ? AND t.deleted_at IS NULL AND t.updated_at > ?"
            " AND (LOWER(COALESCE(t.title, '')) LIKE ? ESCAPE '\\'"
            " OR EXISTS (SELECT 1 FROM {p}messages m WHERE m.thread_id = t.id"
            " AND (LOWER(m.content) LIKE ? ESCAPE '\\'"
            " OR LOWER(CAST(m.fields AS TEXT)) LIKE ? ESCAPE '\\')))"
            " ORDER BY t.updated_at DESC, t.id LIMIT ? OFFSET ?"
        )
        args = (owner, self._clock() - self.limits.ttl_s, pattern, pattern, pattern, limit,
                offset)  # fmt: skip
        rows = await self._read(lambda db: db.fetch(self.dialect.sql(sql), *args))
        return [decode_thread(row, self.limits.ttl_s) for row in rows]
