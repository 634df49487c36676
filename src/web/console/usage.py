"""Usage: calls and cost per day (stacked by model or face), per key, per model, per face
and, for the operator, per principal, as charts with a table under each.

``/console/usage`` shows the signed-in principal's own calls; the operator's
``/console/admin/usage`` shows everyone's (the read refuses it to anyone else,
as the Spend pages do). The period is whole UTC days: the last ``days`` (the
form offers 7, 30 and 90), or ``since``/``until`` dates (``until`` not
included). Calls are counted whatever their price; amounts are per currency and
never added across currencies.
Everything shown is data (principal, key, model names) and is escaped by the
templates and :mod:`exai.web.console.charts`.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from exai.errors import ExaiError, ForbiddenError
from exai.web.console.app import PREFIX, Console
from exai.web.console.charts import row_chart, stacked_chart

__all__ = ["routes"]

_NONE = {"key": "(no key)", "model": "(no model call)", "face": "-", "principal": "-"}
_DIMENSIONS = (("keys", "key", "Per key"), ("principals", "principal", "Per principal"),
               ("models", "model", "Per model"), ("faces", "face", "Per face"))  # fmt: skip


def routes(console: Console) -> list[BaseRoute]:
    page = _Usage(console)
    return [
        Route(f"{PREFIX}/usage", page.own, methods=["GET"]),
        Route(f"{PREFIX}/admin/usage", page.everyone, methods=["GET"]),
    ]


def day_text(day: int) -> str:
    """A day since the epoch as its ISO date."""
    return (date(1970, 1, 1) + timedelta(days=day)).isoformat()


def period(query: dict[str, str]) -> dict[str, Any]:
    """What the query asks for, as the port's ``usage`` takes it; ``ValueError`` for days
    that are not a whole number (the core judges the rest)."""
    days_text = query.get("days", "").strip() or "30"
    try:
        days = int(days_text)
    except ValueError:
        raise ValueError(f"days is a whole number of days, not {days_text[:20]!r}") from None
    return {"days": days, "since": query.get("since", "").strip(),
            "until": query.get("until", "").strip(),
            "split": query.get("split", "").strip() or "model"}  # fmt: skip


def _label(line: dict[str, Any], name: str) -> str:
    value = line.get(name)
    if value is None:
        return _NONE[name]
    if name == "key" and line.get("key_name"):
        return f"{value} ({line['key_name']})"
    return str(value)


def day_charts(report: dict[str, Any], first: int, end: int) -> list[dict[str, Any]]:
    """Calls per day, then cost per day in each currency, each stacked by the split, with
    its table (days with calls only)."""
    split = report["split"]
    labels = [day_text(d) for d in range(first, end)]
    index = {label: i for i, label in enumerate(labels)}
    calls: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0)] * len(labels))
    costs: dict[str, dict[str, list[Decimal]]] = defaultdict(
        lambda: defaultdict(lambda: [Decimal(0)] * len(labels))
    )
    for line in report["groups"]:
        i, name = index[line["day"]], _label(line, split)
        calls[name][i] += line["calls"]
        if line["currency"] is not None:
            costs[line["currency"]][name][i] += Decimal(str(line["cost"]))
    out = []
    for n, (unit, series, title) in enumerate(
        [("calls", calls, "Calls per day")]
        + [(c, costs[c], f"Cost per day ({c})") for c in sorted(costs)]
    ):
        names = sorted(series, key=lambda k: sum(series[k]), reverse=True)
        rows = [(label, [series[k][i] for k in names], sum(series[k][i] for k in names))
                for i, label in enumerate(labels) if any(series[k][i] for k in names)]  # fmt: skip
        out.append({
            "title": title, "unit": unit, "names": names, "rows": rows,
            "chart": stacked_chart(f"days-{n}", f"{title}, by {split}", labels,
                                   [(k, series[k]) for k in names], unit),
        })  # fmt: skip
    return out


def dimension(report: dict[str, Any], name: str, key: str) -> dict[str, Any]:
    """One name per row (keys, models...): its calls, errors, tokens and cost in each
    currency, a row chart of the cost per currency (of the calls when none is priced)."""
    rows: dict[str, dict[str, Any]] = {}
    for line in report["groups"]:
        label = _label(line, key)
        row = rows.setdefault(label, {"name": label, "calls": 0, "errors": 0, "prompt": 0,
                                      "completion": 0, "cost": {}})  # fmt: skip
        row["calls"] += line["calls"]
        row["errors"] += line["errors"]
        row["prompt"] += line["prompt_tokens"]
        row["completion"] += line["completion_tokens"]
        if line["currency"] is not None:
            row["cost"][line["currency"]] = Decimal(str(line["cost"]))
    currencies = sorted({c for row in rows.values() for c in row["cost"]})
    charts = [
        row_chart(f"{name}-{c}", f"Cost per {key} ({c})",
                  [(r["name"], r["cost"][c]) for r in rows.values() if c in r["cost"]], c)
        for c in currencies
    ] or ([row_chart(f"{name}-calls", f"Calls per {key}",
                     [(r["name"], Decimal(r["calls"])) for r in rows.values()], "calls")]
          if rows else [])  # fmt: skip
    # In the charts' order: by cost in the first currency, then by calls.
    first = currencies[0] if currencies else ""
    ranked = sorted(rows.values(),
                    key=lambda r: (-r["cost"].get(first, 0), -r["calls"], r["name"]))  # fmt: skip
    return {"name": name, "currencies": currencies, "charts": charts, "rows": ranked}


class _Usage:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.reads = console.core.reads

    async def own(self, request: Request) -> Response:
        return await self._show(request, everyone=False)

    async def everyone(self, request: Request) -> Response:
        return await self._show(request, everyone=True)

    async def _show(self, request: Request, *, everyone: bool) -> Response:
        try:
            form = period(dict(request.query_params))
            data = await self.reads.usage(self.console.principal(request), everyone=everyone,
                                          **form)  # fmt: skip
        except ForbiddenError as exc:
            return self.console.refused(request, 403, exc.message)
        except ValueError as exc:
            return self.console.refused(request, 400, f"That period cannot be shown: {exc}")
        except ExaiError as exc:
            return self.console.refused(request, 400, f"That period cannot be shown: {exc.message}")
        first, end = data["first_day"], data["end_day"]
        sections = [
            {"title": title, "key": key, **dimension(data[name], name, key)}
            for name, key, title in _DIMENSIONS
            if name in data
        ]
        return self.console.page(
            request, "usage.html", everyone=everyone, form=form,
            action=f"{PREFIX}/admin/usage" if everyone else f"{PREFIX}/usage",
            since=day_text(first), until=day_text(end - 1), split=form["split"],
            days_total=end - first, totals=data["days"]["totals"],
            day_charts=day_charts(data["days"], first, end), sections=sections,
        )  # fmt: skip
