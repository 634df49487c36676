"""Several daemons, one service: what they share through Postgres beside conversations.

:func:`open_cluster` gives a :class:`ClusterState` when the conversation store
is Postgres (``EXAI_STORE_URL``), and None for SQLite, which serves one daemon
and keeps sessions, replay and rate limits in its memory as before. Nothing
here coordinates daemons by talking to each other: Postgres is the one shared
engine (rows for sessions, results and rate windows; advisory locks for the
workflow step lock, see :meth:`exai.store.postgres.PostgresStore.advisory_lock`).
"""

from __future__ import annotations

from typing import Any

from exai.cluster.rates import WindowCounts
from exai.cluster.shared import ClusterState, SharedResult, SharedSession
from exai.settings import Settings

__all__ = ["ClusterState", "SharedResult", "SharedSession", "WindowCounts", "open_cluster"]


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
