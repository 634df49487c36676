"""Spend: cost per day, per model and per tool as charts, and the budget left.

``/console/spend`` shows the signed-in principal's own spend; the operator's
``/console/admin/spend`` shows every principal's, with each budget (the
read refuses it to anyone else). Amounts are per currency: different
currencies are never added, so each currency gets its own charts. Calls to
models without a price count their tokens only and are listed apart.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from exai.errors import ForbiddenError
from exai.web.console.app import PREFIX, Console
from exai.web.console.charts import column_chart, row_chart

__all__ = ["routes"]

_DAY = 86400.0


def routes(console: Console) -> list[BaseRoute]:
    face = _Spend(console)
    return [
        Route(f"{PREFIX}/spend", face.own, methods=["GET"]),
        Route(f"{PREFIX}/admin/spend", face.everyone, methods=["GET"]),
    ]


def _days(request: Request) -> int:
    try:
        return max(1, min(int(request.query_params.get("days") or 30), 366))
    except ValueError:
        return 30


def _by_currency(lines: list[dict[str, Any]]) -> dict[str, list[tuple[str, Decimal]]]:
    out: dict[str, list[tuple[str, Decimal]]] = defaultdict(list)
    for line in lines:
        if line["currency"] is not None:
            out[line["currency"]].append((str(line["key"] or "-"), Decimal(line["cost"])))
    return out


def _every_day(
    points: list[tuple[str, Decimal]], since: float, days: int
) -> list[tuple[str, Decimal]]:
    """The days of the period in order, days without spend at zero."""
    from datetime import UTC, datetime

    have = dict(points)
    out = []
    for i in range(days):
        day = datetime.fromtimestamp(since + i * _DAY, UTC).date().isoformat()
        out.append((day, have.get(day, Decimal(0))))
    return out


def charts(data: dict[str, Any], days: int, groups: dict[str, str]) -> list[dict[str, Any]]:
    """One section per currency: a day chart, then a row chart per group (models, tools...)."""
    by_day = _by_currency(data["days"])
    grouped = {key: _by_currency(data[key]) for key in groups}
    currencies = sorted(set(by_day) | {c for g in grouped.values() for c in g})
    sections = []
    for n, currency in enumerate(currencies):
        series = _every_day(by_day.get(currency, []), data["since"], days)
        total = sum((v for _, v in series), Decimal(0))
        section: dict[str, Any] = {
            "currency": currency,
            "total": total,
            "day_chart": column_chart(f"day-{n}", f"Cost per day ({currency})", series, currency),
            "day_rows": [(d, v) for d, v in series if v > 0],
            "groups": [],
        }
        for key, label in groups.items():
            points = grouped[key].get(currency, [])
            chart = (
                row_chart(f"{key}-{n}", f"Cost per {label} ({currency})", points, currency)
                if points
                else Markup("")
            )
            section["groups"].append(
                {
                    "label": label,
                    "chart": chart,
                    "rows": sorted(points, key=lambda p: p[1], reverse=True),
                }
            )
        sections.append(section)
    return sections


class _Spend:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.reads = console.core.reads

    async def own(self, request: Request) -> Response:
        days = _days(request)
        data = await self.reads.spend(self.console.principal(request), days=days)
        unpriced = [line for key in ("models",) for line in data[key] if line["currency"] is None]
        return self.console.page(
            request,
            "spend.html",
            days=days,
            budget=data["budget"],
            sections=charts(data, days, {"models": "model", "tools": "tool"}),
            unpriced=unpriced,
        )

    async def everyone(self, request: Request) -> Response:
        days = _days(request)
        try:
            data = await self.reads.spend_all(self.console.principal(request), days=days)
        except ForbiddenError as exc:
            return self.console.refused(request, 403, exc.message)
        return self.console.page(
            request,
            "admin_spend.html",
            days=days,
            budgets=data["budgets"],
            sections=charts(data, days, {"principals": "principal"}),
        )
