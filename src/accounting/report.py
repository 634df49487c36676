"""The usage report: the store's per-group sums made readable, without I/O.

:meth:`exai.store.costs.CostAccounts.usage_report` sums calls, tokens and cost
per group and currency over a period; this turns its lines into what ``exai
usage`` prints (a table, or JSON): amounts in currency units, the share of
prompt tokens billed at the cached price, and totals per currency. Amounts in
different currencies are never added; calls to unpriced models are reported
with currency ``null`` and their tokens.

The daily sums (:mod:`exai.store.usage`: every call, per UTC day, principal,
key, face and model) are made readable here too: :func:`sums_report` and
:func:`render_sums`, over whole UTC days (:func:`day_span`), grouped by one of
them and optionally split by another (a table of days against models, say).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from exai.providers.pricing import from_nanos
from exai.store.costs import UsageLine
from exai.store.usage import UsageSum

__all__ = [
    "day_span",
    "day_text",
    "parse_when",
    "period",
    "render_sums",
    "render_table",
    "report",
    "sums_report",
]


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


# --- the daily usage sums (exai.store.usage): keys, faces, and a split ---------------

_DAY = 86400


def day_span(
    now: float, *, since: str | None = None, until: str | None = None, days: float | None = None
) -> tuple[int, int]:
    """``[first, end)`` in UTC days since the epoch, for the daily sums: whole days only.

    ``since``/``until`` are dates (a time other than midnight UTC is refused, not
    rounded); without ``since``, the last ``days`` (30) days up to and including
    ``until``'s day before, or today."""
    if days is not None and (days != int(days) or days < 1):
        raise ValueError("days counts whole UTC days here (1 or more)")
    end = _day(until, "until") if until else int(now // _DAY) + 1
    first = _day(since, "since") if since else end - int(30 if days is None else days)
    if first >= end:
        raise ValueError("the period is empty: since must be before until")
    return first, end


def _day(text: str, option: str) -> int:
    at = parse_when(text)
    if at % _DAY:
        raise ValueError(f"{option} {text!r}: the daily sums start at UTC midnight; give a date")
    return int(at // _DAY)


def day_text(day: int | str) -> str:
    """A day since the epoch as its ISO date."""
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(days=int(day))).date().isoformat()


def sums_report(
    sums: Iterable[UsageSum], by: str, split: str | None, first_day: int, end_day: int,
    names: dict[str, str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The daily sums grouped ``by`` (and ``split``) as JSON-ready data: the period
    (``until`` exclusive), one line per group, split value and currency, totals per
    currency. ``names`` labels keys (id: name) where a key is the group or split."""
    names = names or {}

    def shown(name: str | None, value: str | None) -> str | None:
        return day_text(value) if name == "day" and value is not None else value

    groups, totals = [], dict[str | None, list[int]]()
    for s in sums:
        values = [s.calls, s.errors, s.model_calls, s.prompt_tokens, s.completion_tokens, s.cost]
        held = totals.setdefault(s.currency, [0] * 6)
        for i, v in enumerate(values):
            held[i] += v
        line: dict[str, Any] = {by: shown(by, s.key)}
        if split is not None:
            line[split] = shown(split, s.split)
        for name, value in ((by, s.key), (split, s.split)):
            if name == "key" and value is not None and names.get(value):
                line["key_name"] = names[value]
        groups.append({**line, **_sums(s.currency, values)})
    return {
        "since": day_text(first_day),
        "until": day_text(end_day),
        "group_by": by,
        "split": split,
        "counts": "calls",
        "groups": groups,
        "totals": [_sums(c, v) for c, v in sorted(totals.items(), key=lambda kv: kv[0] or "")],
    }


def _sums(currency: str | None, values: Sequence[int]) -> dict[str, Any]:
    calls, errors, model_calls, prompt, completion, cost = values
    return {
        "currency": currency, "calls": calls, "errors": errors, "model_calls": model_calls,
        "prompt_tokens": prompt, "completion_tokens": completion,
        "cost": None if currency is None else _money(cost),
    }  # fmt: skip


def _bar(value: float, most: float, width: int = 20) -> str:
    """A bar of eighth-blocks, ``width`` characters at ``most``."""
    if most <= 0 or value <= 0:
        return ""
    eighths = max(1, round(value / most * width * 8))
    return "█" * (eighths // 8) + ("", "▏", "▎", "▍", "▌", "▋", "▊", "▉")[eighths % 8]


def _label(line: dict[str, Any], name: str) -> str:
    value = line.get(name)
    text = "-" if value is None else str(value)
    if name == "key" and line.get("key_name"):
        text += f" ({line['key_name']})"
    return text


def _grid(rows: list[Sequence[str]], left: int) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [c.ljust(w) if i < left or i == len(row) - 1 else c.rjust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]  # fmt: skip
        out.append("  ".join(cells).rstrip())
    return out


def render_sums(data: dict[str, Any], *, bars: bool = False) -> str:
    """The daily sums for people. Without a split: one row per group and currency, with
    calls, errors, tokens and cost (a bar of the cost, or of the calls where unpriced,
    with ``bars``). With one: per currency, a table of the groups against the split's
    values, cost in each cell (calls for unpriced calls), a total and its bar."""
    by, split = data["group_by"], data["split"]
    head = f"usage {data['since']} .. {data['until']} (UTC days), by {by}"
    out = [head + (f", split by {split}" if split else "") + "; every call counted"]
    if not data["groups"]:
        return "\n".join([*out, "(no calls in this period)"])
    if split is None:
        rows: list[Sequence[str]] = [(by, "currency", "calls", "errors", "prompt", "completion",
                                      "cost", "")]  # fmt: skip
        peaks = {c: max(_measure(g) for g in data["groups"] if g["currency"] == c)
                 for c in {g["currency"] for g in data["groups"]}}  # fmt: skip
        for g in [*data["groups"], *({by: "TOTAL", **t} for t in data["totals"])]:
            rows.append((_label(g, by), g["currency"] or "unpriced", str(g["calls"]),
                         str(g["errors"]), str(g["prompt_tokens"]), str(g["completion_tokens"]),
                         "-" if g["cost"] is None else f"{g['cost']:.6f}",
                         _bar(_measure(g), peaks[g["currency"]]) if bars and g[by] != "TOTAL"
                         else ""))  # fmt: skip
        return "\n".join([*out, *_grid(rows, 2)])
    for currency in sorted({g["currency"] for g in data["groups"]}, key=lambda c: c or ""):
        lines = [g for g in data["groups"] if g["currency"] == currency]
        columns = sorted({_label(g, split) for g in lines})
        cells: dict[str, dict[str, float]] = {}
        for g in lines:
            cells.setdefault(_label(g, by), {})[_label(g, split)] = _measure(g)
        totals = {row: sum(v.values()) for row, v in cells.items()}
        most = max(totals.values(), default=0.0)
        unit = currency or "calls (unpriced)"
        rows = [(by, *columns, "total", "")]
        for row, values in cells.items():
            bar = _bar(totals[row], most) if bars else ""
            cells_shown = [_cell(values.get(c), currency) for c in columns]
            rows.append((row, *cells_shown, _cell(totals[row], currency), bar))
        out += ["", unit, *_grid(rows, 1)]
    return "\n".join(out)


def _measure(line: dict[str, Any]) -> float:
    return float(line["calls"]) if line["cost"] is None else float(line["cost"])


def _cell(value: float | None, currency: str | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if currency is None else f"{value:.4f}"
