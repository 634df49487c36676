"""Responses kept for the OpenAI Responses API: ``store`` and ``previous_response_id``.

The Responses API is stateful: a response made with ``store: true`` (its
default) can be continued by naming it as ``previous_response_id``, sending
only the new input. exai keeps each such response in the conversation store, as
a link of a chain: its owner, the response it continued (``parent_id``), and
the chat messages it added to the conversation (the new input and the model's
answer; not the request's ``instructions``, which the API does not carry over).
Continuing a response walks its chain back to the first link and replays the
messages in order.

A response belongs to the principal whose request made it; to anyone else, or
once it is older than the store's TTL, or when a link of its chain is gone, it
does not exist (``CONVERSATION_NOT_FOUND``), so a conversation is never
continued with part of its history missing. Pruning removes responses past the
TTL with the threads.

:class:`ResponseRows` is a part of :class:`~exai.store.sql.SqlStore`; the table
comes with its own migration for each backend (:data:`SQLITE_MIGRATION`,
:data:`POSTGRES_MIGRATION`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from exai.errors import ConversationNotFoundError, ValidationError_
from exai.sqldb.executor import Executor
from exai.store.rows import dumps, loads
from exai.store.sql_base import SqlBase

__all__ = ["MAX_CHAIN", "POSTGRES_MIGRATION", "SQLITE_MIGRATION", "ResponseRows"]

# The longest chain replayed: a conversation of more responses than this is refused
# rather than walked without end.
MAX_CHAIN = 10_000
_ID = re.compile(r"^resp_[A-Za-z0-9]{8,64}$")

SQLITE_MIGRATION = """
CREATE TABLE responses (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    parent_id TEXT,
    created_at REAL NOT NULL,
    messages TEXT NOT NULL
);
CREATE INDEX responses_created ON responses(created_at);
"""

POSTGRES_MIGRATION = """
CREATE TABLE {s}.responses (
    id text PRIMARY KEY,
    owner text NOT NULL,
    parent_id text,
    created_at double precision NOT NULL,
    messages text NOT NULL
);
CREATE INDEX responses_created ON {s}.responses(created_at);
"""

_CHAIN = f"""
WITH RECURSIVE chain(id, parent_id, owner, created_at, messages, depth) AS (
    SELECT id, parent_id, owner, created_at, messages, 0 FROM {{p}}responses WHERE id = ?
    UNION ALL
    SELECT r.id, r.parent_id, r.owner, r.created_at, r.messages, c.depth + 1
    FROM {{p}}responses r JOIN chain c ON r.id = c.parent_id
    WHERE c.depth < {MAX_CHAIN}
)
SELECT id, parent_id, owner, created_at, messages FROM chain ORDER BY depth DESC
"""
_PUT = (
    "INSERT INTO {p}responses (id, owner, parent_id, created_at, messages)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
)


def _not_found(response_id: str) -> ConversationNotFoundError:
    return ConversationNotFoundError(
        f"the response {response_id} does not exist, is not yours, has expired, or a "
        "response it continued is gone; send the whole conversation as input instead",
        details={"param": "previous_response_id"},
    )


class ResponseRows(SqlBase):
    """Stored responses, on the store's connections (a part of ``SqlStore``)."""

    async def put_response(
        self,
        response_id: str,
        owner: str,
        messages: Sequence[Mapping[str, Any]],
        parent_id: str | None = None,
    ) -> None:
        """Keep a response: the messages it added, after ``parent_id``'s.

        Storing the same id again (a retried call) keeps the first.
        """
        if not _ID.match(response_id):
            raise ValidationError_(f"{response_id!r} is not a response id (resp_...)")
        sql = self._q(_PUT)
        row = (response_id, owner, parent_id, self._clock(), dumps([dict(m) for m in messages]))
        await self._write(lambda tx: tx.execute(sql, *row))

    async def response_messages(self, response_id: str, owner: str) -> list[dict[str, Any]]:
        """Every message of the conversation up to and including ``response_id``, in order.

        Raises ``ConversationNotFoundError`` for a response that is not the owner's,
        has expired, or whose chain has a missing link.
        """
        if not _ID.match(response_id):
            raise _not_found(response_id)
        sql = self._q(_CHAIN)

        async def body(db: Executor) -> Sequence[Sequence[Any]]:
            return await db.fetch(sql, response_id)

        rows = await self._read(body)
        cutoff = self._clock() - self.limits.ttl_s
        if not rows or rows[0][1] is not None:  # none, or the first link is gone
            raise _not_found(response_id)
        messages: list[dict[str, Any]] = []
        for _, _, row_owner, created_at, encoded in rows:
            if row_owner != owner or created_at <= cutoff:
                raise _not_found(response_id)
            messages += loads(encoded)
        return messages

    async def prune_responses(self, now: float | None = None) -> int:
        """Remove the responses older than the TTL; how many went."""
        cutoff = (self._clock() if now is None else now) - self.limits.ttl_s
        sql = self._q("DELETE FROM {p}responses WHERE created_at <= ?")
        count: int = await self._write(lambda tx: tx.execute(sql, cutoff))
        return count
