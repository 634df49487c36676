"""Finding a principal's threads by what they say: title and message text.

:class:`ThreadSearch` is the part of :class:`~exai.store.sql.SqlStore` that the
console's thread list uses. A plain case-insensitive substring match, written
once for both backends (``LOWER(...) LIKE LOWER(?)``, wildcards in the query
escaped), over the owner's live threads only: it answers "where did I talk
about X" for one person's threads, not a ranked search over everyone's.
"""

from __future__ import annotations

from typing import Any

from exai.store.base import Thread
from exai.store.rows import THREAD_COLUMNS, decode_thread
from exai.store.sql_base import SqlBase

__all__ = ["ThreadSearch", "like_pattern", "origin_filter"]

_COLUMNS = ", ".join(f"t.{c.strip()}" for c in THREAD_COLUMNS.split(","))


def like_pattern(text: str) -> str:
    """``text`` as a LIKE pattern that matches it anywhere, its own ``%`` and ``_`` literal."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def origin_filter(
    prefix: str, *, agent: bool | None, face: str | None, client: str | None
) -> tuple[list[str], list[Any]]:
    """The conditions (and their arguments) that keep threads by where they came from:
    agent sessions only (``agent`` True) or none of them (False), those of one model
    ``face``, those whose client's name holds ``client`` (any case). ``prefix`` is the
    threads table's alias with its dot, or empty."""
    where: list[str] = []
    args: list[Any] = []
    if agent is not None:
        where.append(f"{prefix}face IS {'NOT ' if agent else ''}NULL")
    if face is not None:
        where.append(f"{prefix}face = ?")
        args.append(face)
    if client is not None:
        where.append(f"LOWER({prefix}client) LIKE ? ESCAPE '\\'")
        args.append(like_pattern(client.lower()))
    return where, args


class ThreadSearch(SqlBase):
    """Mixed into :class:`~exai.store.sql.SqlStore` with the other table groups."""

    async def search_threads(
        self,
        owner: str,
        text: str,
        *,
        limit: int = 50,
        offset: int = 0,
        agent: bool | None = None,
        face: str | None = None,
        client: str | None = None,
    ) -> list[Thread]:
        """The owner's live threads whose title or any message contains ``text``,
        most recently updated first. A message's text is its content, and what it
        holds besides (a list of parts, as agents send their prompts; tool calls and
        their arguments), searched as its stored JSON. ``agent``, ``face`` and
        ``client`` keep threads as :func:`origin_filter` says."""
        pattern = like_pattern(text.strip().lower())
        origin, origin_args = origin_filter("t.", agent=agent, face=face, client=client)
        sql = (
            f"SELECT {_COLUMNS} FROM {{p}}threads t"
            " WHERE t.owner = ? AND t.deleted_at IS NULL AND t.updated_at > ?"
            + "".join(f" AND {condition}" for condition in origin)
            + " AND (LOWER(COALESCE(t.title, '')) LIKE ? ESCAPE '\\'"
            " OR EXISTS (SELECT 1 FROM {p}messages m WHERE m.thread_id = t.id"
            " AND (LOWER(m.content) LIKE ? ESCAPE '\\'"
            " OR LOWER(CAST(m.fields AS TEXT)) LIKE ? ESCAPE '\\')))"
            " ORDER BY t.updated_at DESC, t.id LIMIT ? OFFSET ?"
        )
        args = (owner, self._clock() - self.limits.ttl_s, *origin_args, pattern, pattern,
                pattern, limit, offset)  # fmt: skip
        rows = await self._read(lambda db: db.fetch(self.dialect.sql(sql), *args))
        return [decode_thread(row, self.limits.ttl_s) for row in rows]
