"""Cost accounting in the conversation store: one row per provider call, and the sums.

Every model call a tool makes leaves a :class:`CostRow`: who made it (principal,
tool, session, request, thread), which model answered, its tokens and what it
cost, in integer billionths of its currency (*nanos*, see
:mod:`exai.providers.pricing`) so that SQL sums are exact on both backends. A
call to a model without a price has no currency and no amounts; it still counts
its tokens.

Rows keep no reference to their thread: what was spent stays spent when a
conversation is deleted or pruned. :class:`CostAccounts` is the part of
:class:`~exai.store.sql.SqlStore` that writes and sums them, written once for
both backends like the rest of its SQL.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from exai.errors import ValidationError_
from exai.sqldb.executor import Dialect, insert_all

__all__ = ["COST_GROUPS", "CostAccounts", "CostRow", "UsageLine"]

# What a usage report may be grouped by, and the column each names.
COST_GROUPS: Final[dict[str, str]] = {
    "principal": "principal",
    "tool": "tool",
    "thread": "thread_id",
    "model": "model",
    "provider": "provider",
    "day": "day",
}

_COLUMNS = (
    "at, instance_id, principal, tool, session_id, request_id, thread_id, model, provider,"
    " prompt_tokens, cached_prompt_tokens, completion_tokens, reasoning_tokens, currency,"
    " cost_input, cost_cached_input, cost_output, cost_total, trace_id"
)
_INSERT = f"INSERT INTO {{p}}call_costs ({_COLUMNS}) VALUES ({', '.join('?' * 19)})"
_SUMS = (
    "COUNT(*), SUM(prompt_tokens), SUM(cached_prompt_tokens), SUM(completion_tokens),"
    " SUM(reasoning_tokens), SUM(cost_input), SUM(cost_cached_input), SUM(cost_output),"
    " SUM(cost_total)"
)


@dataclass(frozen=True, slots=True)
class CostRow:
    """One provider call's tokens and cost. ``currency`` None: the model has no price."""

    at: float  # epoch seconds
    instance_id: str
    principal: str
    tool: str
    session_id: str
    request_id: str
    thread_id: str | None
    model: str
    provider: str
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    currency: str | None
    cost_input: int  # nanos
    cost_cached_input: int
    cost_output: int
    cost_total: int
    trace_id: str | None = None  # the call's trace, when tracing was on

    def values(self) -> tuple[Any, ...]:
        return (self.at, self.instance_id, self.principal, self.tool, self.session_id,
                self.request_id, self.thread_id, self.model, self.provider, self.prompt_tokens,
                self.cached_prompt_tokens, self.completion_tokens, self.reasoning_tokens,
                self.currency, self.cost_input, self.cost_cached_input, self.cost_output,
                self.cost_total, self.trace_id)  # fmt: skip


@dataclass(frozen=True, slots=True)
class UsageLine:
    """One group of a usage report, in one currency (None: calls without a price)."""

    key: str | None
    currency: str | None
    calls: int
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cost_input: int  # nanos
    cost_cached_input: int
    cost_output: int
    cost_total: int


class CostAccounts:
    """Writes and sums :class:`CostRow` s; mixed into the SQL store."""

    dialect: Dialect

    @abstractmethod
    async def _read(self, body: Any) -> Any: ...

    @abstractmethod
    async def _write(self, body: Any) -> Any: ...

    async def record_costs(self, rows: Sequence[CostRow]) -> None:
        """Store the rows, all or none, in one transaction."""
        await insert_all(self._write, self.dialect, _INSERT, [row.values() for row in rows])

    async def spent(
        self,
        principal: str,
        currency: str,
        since: float,
        until: float,
        *,
        excluding_instance: str | None = None,
    ) -> int:
        """Nanos ``principal`` spent in ``currency`` in ``[since, until)``, leaving out
        one daemon's rows (the asking daemon counts its own in memory)."""
        sql = ("SELECT SUM(cost_total) FROM {p}call_costs WHERE principal = ? AND currency = ?"
               " AND at >= ? AND at < ? AND instance_id <> ?")  # fmt: skip
        args = (principal, currency, since, until, excluding_instance or "")
        row = await self._read(lambda db: db.fetchrow(self.dialect.sql(sql), *args))
        return int(row[0] or 0) if row else 0

    async def usage_report(
        self, since: float, until: float, group_by: str = "principal", *,
        principal: str | None = None,
    ) -> list[UsageLine]:  # fmt: skip
        """Calls, tokens and cost in ``[since, until)`` per group and currency.

        Every principal's calls (the operator's view), or only ``principal``'s
        (what a person sees of their own spend). Ordered by group, then currency.
        """
        column = COST_GROUPS.get(group_by)
        if column is None:
            raise ValidationError_(
                f"cannot group usage by {group_by!r}; choose one of {', '.join(COST_GROUPS)}"
            )
        if column == "day":
            # Whole UTC days since the epoch, turned into dates by the caller:
            # the same arithmetic on both backends.
            column = "CAST(FLOOR(at / 86400) AS BIGINT)"
        where, args = "at >= ? AND at < ?", list[Any]([since, until])
        if principal is not None:
            where, args = "principal = ? AND " + where, [principal, *args]
        sql = (f"SELECT {column}, currency, {_SUMS} FROM {{p}}call_costs"
               f" WHERE {where} GROUP BY {column}, currency")  # fmt: skip
        rows = await self._read(lambda db: db.fetch(self.dialect.sql(sql), *args))
        lines = [
            UsageLine(None if r[0] is None else str(r[0]), r[1], *(int(v or 0) for v in r[2:]))
            for r in rows
        ]
        return sorted(lines, key=lambda line: (line.key or "", line.currency or ""))

    async def turn_traces(self, thread_id: str, principal: str) -> dict[int, str]:
        """The trace of each turn of the principal's thread, ``{first seq of the turn:
        trace id}``, for the turns whose call was traced (schema version 8)."""
        sql = (
            "SELECT r.first_seq, MIN(c.trace_id) FROM {p}call_costs c"
            " JOIN {p}request_turns r ON r.owner = c.principal AND r.session_id = c.session_id"
            " AND r.request_id = c.request_id"
            " WHERE r.thread_id = ? AND r.owner = ? AND c.trace_id IS NOT NULL"
            " GROUP BY r.first_seq"
        )
        rows = await self._read(lambda db: db.fetch(self.dialect.sql(sql), thread_id, principal))
        return {int(seq): str(trace) for seq, trace in rows}

    async def thread_costs(
        self, thread_ids: Sequence[str], principal: str
    ) -> dict[str, dict[str, int]]:
        """What each of the principal's threads cost, ``{thread id: {currency: nanos}}``,
        in one query: the sum of its turns' costs as :meth:`turn_costs` finds them."""
        if not thread_ids:
            return {}
        marks = ", ".join("?" * len(thread_ids))
        sql = (
            "SELECT r.thread_id, c.currency, SUM(c.cost_total) FROM {p}call_costs c"
            " JOIN {p}request_turns r ON r.owner = c.principal AND r.session_id = c.session_id"
            " AND r.request_id = c.request_id"
            f" WHERE r.owner = ? AND r.thread_id IN ({marks}) AND c.currency IS NOT NULL"
            " GROUP BY r.thread_id, c.currency"
        )
        args = (principal, *thread_ids)
        rows = await self._read(lambda db: db.fetch(self.dialect.sql(sql), *args))
        out: dict[str, dict[str, int]] = {}
        for thread_id, currency, nanos in rows:
            out.setdefault(str(thread_id), {})[str(currency)] = int(nanos or 0)
        return out

    async def turn_costs(self, thread_id: str, principal: str) -> dict[int, dict[str, int]]:
        """What each turn of the principal's thread cost: ``{first seq of the turn:
        {currency: nanos}}``, from the turn's own call (found by its request key, so
        two turns under one request id in different sessions stay apart). Calls to
        unpriced models and turns no call of the principal stored are absent. A turn
        is found by its request key alone (``call_costs_request``, schema version 10),
        so the turn an agent session's call stored after its cost row was written
        (its row names no thread) has its cost too.
        """
        sql = (
            "SELECT r.first_seq, c.currency, SUM(c.cost_total) FROM {p}call_costs c"
            " JOIN {p}request_turns r ON r.owner = c.principal AND r.session_id = c.session_id"
            " AND r.request_id = c.request_id"
            " WHERE r.thread_id = ? AND r.owner = ? AND c.currency IS NOT NULL"
            " GROUP BY r.first_seq, c.currency"
        )
        rows = await self._read(lambda db: db.fetch(self.dialect.sql(sql), thread_id, principal))
        out: dict[int, dict[str, int]] = {}
        for seq, currency, nanos in rows:
            out.setdefault(int(seq), {})[str(currency)] = int(nanos or 0)
        return out
