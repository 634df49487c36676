"""Several daemons, one service: what they share through Postgres beside conversations.

:func:`open_cluster` gives a :class:`ClusterState` when the conversation store
is Postgres (``EXAI_STORE_URL``), and None for SQLite, which serves one daemon
and keeps sessions, replay and rate limits in its memory as before.
:func:`open_shared_reasoning` writes the tool-round reasoning cache through to
either store (:class:`SharedReasoning`): shared by the daemons on Postgres, kept
over a restart on SQLite. Nothing
here coordinates daemons by talking to each other: Postgres is the one shared
engine (rows for sessions, results and rate windows; advisory locks for the
workflow step lock, see :meth:`exai.store.postgres.PostgresStore.advisory_lock`).
"""

from __future__ import annotations

from typing import Any

from exai.cluster.rates import WindowCounts
from exai.cluster.reasoning import SharedReasoning
from exai.cluster.shared import ClusterState, SharedResult, SharedSession
from exai.settings import Settings

__all__ = [
    "ClusterState",
    "SharedReasoning",
    "SharedResult",
    "SharedSession",
    "WindowCounts",
    "open_cluster",
    "open_shared_reasoning",
]


def open_cluster(store: Any, settings: Settings) -> ClusterState | None:
    """The shared state over ``store``'s database, started; None unless it is Postgres."""
    from exai.store.postgres import PostgresStore

    if not isinstance(store, PostgresStore):
        return None
    s = settings
    state = ClusterState(
        store.pool,
        store.schema,
        sync_s=s.cluster_sync_s,
        replay_window_s=s.replay_window_s,
        session_ttl_s=max(s.replay_window_s, 3600.0),
        rate_per_min=s.rate_limit_per_min,
        rate_window_s=s.cluster_rate_window_s,
    )
    state.start()
    return state


def open_shared_reasoning(store: Any, providers: Any) -> SharedReasoning | None:
    """The tool-round reasoning cache of ``providers`` (a ProviderRegistry) written
    through to ``store``, started; None without a SQL store or a cache."""
    from exai.store.sql import SqlStore

    cache = getattr(providers, "tool_reasoning", None)
    if not isinstance(store, SqlStore) or cache is None or cache.max_bytes <= 0:
        return None
    shared = SharedReasoning(cache, store)
    shared.start()
    return shared
