"""The conversation store's rules, written once in SQL both backends understand.

:class:`SqlStore` holds every rule of :class:`~exai.store.base.ConversationStore`
(ownership, expiry, idempotent appends, turn and fork limits), by table group:
threads and forks (:mod:`exai.store.threads`), turns and their request keys
(:mod:`exai.store.turns`), state, artifacts and vendor uploads
(:mod:`exai.store.artifacts`), cost rows (:mod:`exai.store.costs`), the search
of a principal's threads (:mod:`exai.store.search`), the Responses API's stored
responses (:mod:`exai.store.responses`), the reasoning of callers' tool rounds
(:mod:`exai.store.reasoning`), the console's sign-ins (:mod:`exai.store.sign_ins`),
the operator's keys (:mod:`exai.store.keys`) and agent sessions' heads
(:mod:`exai.store.sessions`), all on
:class:`~exai.store.sql_base.SqlBase`. A backend only supplies connections
through ``_read`` and ``_write`` and a :class:`~exai.sqldb.executor.Dialect`.
"""

from __future__ import annotations

from exai.store.artifacts import ArtifactRows
from exai.store.base import ConversationStore
from exai.store.call_log import CallLog
from exai.store.costs import CostAccounts
from exai.store.keys import KeyRows
from exai.store.limits import LimitRows
from exai.store.reasoning import ReasoningRows
from exai.store.responses import ResponseRows
from exai.store.search import ThreadSearch
from exai.store.sessions import SessionRows
from exai.store.sign_ins import SignInRows
from exai.store.sql_base import Body, T
from exai.store.threads import ThreadRows
from exai.store.turns import TurnRows
from exai.store.usage import UsageDays

__all__ = ["Body", "SqlStore", "T"]


class SqlStore(
    ThreadRows,
    SessionRows,
    TurnRows,
    ArtifactRows,
    CostAccounts,
    CallLog,
    UsageDays,
    ThreadSearch,
    ResponseRows,
    ReasoningRows,
    SignInRows,
    KeyRows,
    LimitRows,
    ConversationStore,
):
    """Everything a conversation store does, over any :class:`~exai.sqldb.executor.Executor`,
    and the per-call cost rows kept beside the conversations (:class:`CostAccounts`)."""

    # Whether other daemons use this store too (Postgres), so that what one of them
    # keeps in its memory may be stale: a console sign-in is then checked here on
    # every request, not only when this daemon's memory does not hold it.
    shared = False

    async def prune(self, now: float | None = None) -> int:
        """Remove expired and deleted threads, and the responses past the TTL; how many
        threads went."""
        threads = await super().prune(now)
        await self.prune_responses(now)
        return threads
