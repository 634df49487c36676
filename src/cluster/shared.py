"""What several daemons on one Postgres share beside conversations.

A daemon whose store is Postgres keeps, in that database (schema version 5):

* ``sessions``: which principal each session belongs to, so any daemon can
  resume it for that principal and refuse it to every other;
* ``call_results``: finished calls' ``call_tool_res`` frames for the replay
  window, so a retry that lands on another daemon is answered without running
  the call (and paying for its model call) again;
* ``rate_windows``: each principal's rate tokens asked for per window, from
  which every daemon leases what it admits (see :mod:`exai.cluster.rates`).

Nothing here is on a call's path. A new session and a finished result are
appended to a list in memory and written every ``sync_s`` by one background
task, in one statement per table whatever their number; leases of rate
tokens are asked for in the same pass. The only read is at ``hello``, when a
client names a session this daemon does not hold: one query brings its owner
and every result it kept, which go into the local replay cache, so calls are
then answered locally as on one daemon.

What this cannot recover: a result finished within ``sync_s`` before its daemon
was killed, and a call that was running on it. Both are run again on the retry;
a conversation turn is still stored once (the store keys it on the request), and
a turn already stored is answered from the store without a model call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from exai.cluster.rates import WindowCounts
from exai.cluster.results import Outcome, last_per_call, worth_sharing
from exai.cluster.writer import stop_then_write
from exai.logs import get_logger

__all__ = ["ClusterState", "SharedResult", "SharedSession"]

log = get_logger("exai.cluster")

# Writes waiting when the database is unreachable are kept up to this many; the
# oldest are dropped beyond it (a result lost here is only run again on a retry).
_MAX_PENDING = 20_000
_PRUNE_EVERY_S = 60.0


class SharedResult(NamedTuple):
    request_id: str
    fingerprint: str
    result: bytes
    age_s: float


class SharedSession(NamedTuple):
    owner: str
    results: list[SharedResult]


class ClusterState:
    """Sessions, finished results and rate counts of one daemon, shared through Postgres."""

    def __init__(
        self,
        pool: Any,
        schema: str,
        *,
        sync_s: float,
        replay_window_s: float,
        session_ttl_s: float,
        rate_per_min: float = 0.0,
        rate_window_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._pool = pool
        self._s = schema
        self.sync_s = sync_s
        self.replay_window_s = replay_window_s
        self.session_ttl_s = session_ttl_s
        self.rates = WindowCounts(rate_per_min, rate_window_s) if rate_per_min > 0 else None
        self.clock = clock
        self._sessions: dict[str, tuple[str, float]] = {}
        self._results: list[tuple[str, str, str, str, bytes, float]] = []
        self._task: asyncio.Task[None] | None = None
        self._pruned_at = 0.0
        self.stats = {"results_written": 0, "sessions_written": 0, "syncs": 0,
                      "sync_failures": 0, "lookups": 0, "resumed": 0}  # fmt: skip

    # --- the call path: memory only ------------------------------------------------

    def note_session(self, session_id: str, owner: str) -> None:
        """A session opened or used here; written with the next synchronization."""
        self._sessions[session_id] = (owner, self.clock())

    def note_result(
        self, session_id: str, owner: str, request_id: str, fingerprint: str, result: bytes,
        error: Outcome | None,
    ) -> None:  # fmt: skip
        """A finished call's result, for a retry on any daemon; written in the background.

        ``error`` is what the call failed with (None: it succeeded); a result
        :func:`~exai.cluster.results.worth_sharing` refuses is not written.
        """
        now = self.clock()
        self._sessions[session_id] = (owner, now)
        if not worth_sharing(error):
            return
        self._results.append((session_id, request_id, owner, fingerprint, result, now))
        if len(self._results) > _MAX_PENDING:
            del self._results[: len(self._results) - _MAX_PENDING]

    def check_rate(self, principal: str, rate_per_min: float | None = None) -> None:
        """``rate_per_min``: the principal's own rate (exai.accounting.limits), if any."""
        if self.rates is not None:
            self.rates.set_rate(principal, rate_per_min)
            self.rates.check(principal, self.clock())

    def spend_rate(self, principal: str) -> None:
        if self.rates is not None:
            self.rates.spend(principal, self.clock())

    # --- reads ---------------------------------------------------------------------

    async def load_session(self, session_id: str) -> SharedSession | None:
        """The session's owner and the results it kept within the replay window, if any
        daemon has written it; one query."""
        self.stats["lookups"] += 1
        now = self.clock()
        s = self._s
        rows = await self._pool.fetch(
            f"SELECT s.owner, r.request_id, r.fingerprint, r.result, r.stored_at"
            f" FROM {s}.sessions s LEFT JOIN {s}.call_results r"
            f" ON r.session_id = s.id AND r.owner = s.owner AND r.stored_at > $2"
            f" WHERE s.id = $1 ORDER BY r.stored_at",
            session_id,
            now - self.replay_window_s,
        )
        if not rows:
            return None
        results = [
            SharedResult(r[1], r[2], bytes(r[3]), max(0.0, now - r[4]))
            for r in rows
            if r[1] is not None
        ]
        return SharedSession(rows[0][0], results)

    # --- the background writer -------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="exai-cluster")

    async def aclose(self) -> None:
        """Stop the writer after writing what is pending (a graceful shutdown loses nothing)."""
        task, self._task = self._task, None
        await stop_then_write(task, self.sync, "cluster synchronization")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.sync_s)
            try:
                await self.sync()
                if self.clock() - self._pruned_at > _PRUNE_EVERY_S:
                    await self.prune()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.stats["sync_failures"] += 1
                log.warning("cluster synchronization failed", error=f"{type(exc).__name__}: {exc}")

    async def sync(self) -> None:
        """Write pending sessions and results and ask for rate leases; one connection,
        at most three statements."""
        sessions, self._sessions = self._sessions, {}
        results, self._results = self._results, []
        rates = self.rates.to_send(self.clock()) if self.rates is not None else []
        if not (sessions or results or rates):
            return
        s = self._s
        try:
            async with self._pool.acquire() as conn:
                if sessions:
                    ids = list(sessions)
                    await conn.execute(
                        f"INSERT INTO {s}.sessions (id, owner, created_at, last_seen)"
                        " SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $3::float8[])"
                        " ON CONFLICT (id) DO UPDATE SET last_seen = EXCLUDED.last_seen"
                        f" WHERE {s}.sessions.owner = EXCLUDED.owner",
                        ids,
                        [sessions[i][0] for i in ids],
                        [sessions[i][1] for i in ids],
                    )
                kept = last_per_call(results)
                if kept:
                    columns = list(zip(*kept, strict=True))
                    await conn.execute(
                        f"INSERT INTO {s}.call_results"
                        " (session_id, request_id, owner, fingerprint, result, stored_at)"
                        " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],"
                        " $5::bytea[], $6::float8[])"
                        " ON CONFLICT (session_id, request_id) DO UPDATE SET"
                        " fingerprint = EXCLUDED.fingerprint, result = EXCLUDED.result,"
                        f" stored_at = EXCLUDED.stored_at WHERE {s}.call_results.owner"
                        " = EXCLUDED.owner",
                        *(list(c) for c in columns),
                    )
                if rates:
                    rows = await conn.fetch(
                        f"INSERT INTO {s}.rate_windows (principal, window_start, calls)"
                        " SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])"
                        " ON CONFLICT (principal, window_start) DO UPDATE SET"
                        f" calls = {s}.rate_windows.calls + EXCLUDED.calls"
                        " RETURNING principal, window_start, calls",
                        [r[0] for r in rates],
                        [r[1] for r in rates],
                        [r[2] for r in rates],
                    )
                    assert self.rates is not None
                    for principal, window, total in rows:
                        self.rates.received(principal, int(window), int(total))
        except BaseException:
            # Kept for the next pass (newer notes win), unless they have piled up.
            for sid, value in sessions.items():
                self._sessions.setdefault(sid, value)
            self._results[:0] = results[-_MAX_PENDING:]
            if self.rates is not None:
                self.rates.failed(rates)
            raise
        self.stats["syncs"] += 1
        self.stats["sessions_written"] += len(sessions)
        self.stats["results_written"] += len(results)

    async def prune(self) -> None:
        """Forget results past the replay window, idle sessions and past rate windows."""
        now = self.clock()
        self._pruned_at = now
        s = self._s
        async with self._pool.acquire() as conn:
            await conn.execute(f"DELETE FROM {s}.call_results WHERE stored_at < $1",
                               now - self.replay_window_s)  # fmt: skip
            await conn.execute(f"DELETE FROM {s}.sessions WHERE last_seen < $1",
                               now - self.session_ttl_s)  # fmt: skip
            if self.rates is not None:
                await conn.execute(f"DELETE FROM {s}.rate_windows WHERE window_start < $1",
                                   int(now - 2 * self.rates.window_s))  # fmt: skip
