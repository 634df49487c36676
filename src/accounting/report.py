"""The usage report: the store's per-group sums made readable, without I/O.

:meth:`exai.store.costs.CostAccounts.usage_report` sums calls, tokens and cost
per group and currency over a period; this turns its lines into what ``exai
usage`` prints (a table, or JSON): amounts in currency units, the share of
prompt tokens billed at the cached price, and totals per currency. Amounts in
different currencies are never added; calls to unpriced models are reported
with currency ``null`` and their tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from exai.providers.pricing import from_nanos
from exai.store.costs import UsageLine

__all__ = ["parse_when", "period", "render_table", "report"]


def parse_when(text: str) -> float:
    """``2026-11-01`` or an ISO 8601 time (UTC unless it says otherwise) -> epoch seconds."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD) or ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def period(
    now: float, *, since: str | None = None, until: str | None = None, days: float | None = None
) -> tuple[float, float]:
    """``[since, until)`` in epoch seconds: explicit bounds, or the last ``days`` (30)."""
    end = parse_when(until) if until else now
    if since:
        start = parse_when(since)
    else:
        start = end - timedelta(days=30 if days is None else days).total_seconds()
    if start >= end:
        raise ValueError("the period is empty: --since must be before --until")
    return start, end


def _key(line: UsageLine, group_by: str) -> str | None:
    if group_by == "day" and line.key is not None:
        return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(days=int(line.key))).date().isoformat()
    return line.key


def _money(nanos: int) -> float:
    return float(from_nanos(nanos))


def _line(line: UsageLine, group_by: str) -> dict[str, Any]:
    priced = line.currency is not None
    return {
        group_by: _key(line, group_by),
        "currency": line.currency,
        "calls": line.calls,
        "prompt_tokens": line.prompt_tokens,
        "cached_prompt_tokens": line.cached_prompt_tokens,
        "cached_share": round(line.cached_prompt_tokens / line.prompt_tokens, 4)
        if line.prompt_tokens
        else 0.0,
        "completion_tokens": line.completion_tokens,
        "reasoning_tokens": line.reasoning_tokens,
        "cost": {
            "input": _money(line.cost_input),
            "cached_input": _money(line.cost_cached_input),
            "output": _money(line.cost_output),
            "total": _money(line.cost_total),
        }
        if priced
        else None,
    }


def report(lines: Iterable[UsageLine], group_by: str, since: float, until: float) -> dict[str, Any]:
    """The whole report as JSON-ready data: the period, the groups, totals per currency."""
    lines = list(lines)
    totals: dict[str | None, list[int]] = {}
    for line in lines:
        held = totals.setdefault(line.currency, [0] * 9)
        values = (line.calls, line.prompt_tokens, line.cached_prompt_tokens,
                  line.completion_tokens, line.reasoning_tokens, line.cost_input,
                  line.cost_cached_input, line.cost_output, line.cost_total)  # fmt: skip
        for i, value in enumerate(values):
            held[i] += value
    total_lines = [
        UsageLine("total", currency, *values)
        for currency, values in sorted(totals.items(), key=lambda kv: kv[0] or "")
    ]
    return {
        "since": datetime.fromtimestamp(since, UTC).isoformat(),
        "until": datetime.fromtimestamp(until, UTC).isoformat(),
        "group_by": group_by,
        "groups": [_line(line, group_by) for line in lines],
        "totals": [
            {k: v for k, v in _line(t, group_by).items() if k != group_by} for t in total_lines
        ],
    }


def render_table(data: dict[str, Any]) -> str:
    """The report for people: one row per group and currency, then the totals."""
    by = data["group_by"]
    head = (by, "currency", "calls", "prompt", "cached", "completion", "cost")
    rows: list[Sequence[str]] = [head]
    for group in [*data["groups"], *({by: "TOTAL", **t} for t in data["totals"])]:
        cost = group["cost"]
        rows.append((
            str(group[by] if group[by] is not None else "-"),
            group["currency"] or "unpriced",
            str(group["calls"]),
            str(group["prompt_tokens"]),
            f"{group['cached_share']:.1%}",
            str(group["completion_tokens"]),
            "-" if cost is None else f"{cost['total']:.6f}",
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    out = [f"usage {data['since']} .. {data['until']}, by {by}"]
    for row in rows:
        cells = [cell.ljust(w) if i < 2 else cell.rjust(w)
                 for i, (cell, w) in enumerate(zip(row, widths, strict=True))]  # fmt: skip
        out.append("  ".join(cells).rstrip())
    if len(rows) == 1:
        out.append("(no calls in this period)")
    return "\n".join(out)
