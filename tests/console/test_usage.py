"""The Usage pages in a real browser (Debian's Chromium): the operator's charts and tables
per day (stacked by model, then by face), key, principal, model and face; a person's own
page holding only their calls; another's usage refused by navigation and by URL; names
carrying markup shown as text; a period that cannot be shown refused by name."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pytest

from exai.keys import KeyRecord
from exai.store.call_log import CallLogRow
from exai.web.console.charts import stacked_chart
from tests.console.conftest import ALICE, BOB
from tests.console.test_browser import Visitor

pytestmark = pytest.mark.timeout(120)

DAY = 86400
TODAY = int(time.time() // DAY)
XSS_KEY = "<img src=x onerror=window.__xss=1>"
XSS_MODEL = "</td><script>window.__xss=2</script>"
XSS_PRINCIPAL = "<svg onload=window.__xss=3>"


def _call(n: int, days_ago: int, principal: str, key: str | None, face: str, model: str,
          cost: int) -> CallLogRow:  # fmt: skip
    return CallLogRow(
        at=(TODAY - days_ago) * DAY + 60.0 + n, instance_id="seed", principal=principal,
        key_id=key, face=face, client=None, tool="chat", model_asked=None, model=model,
        provider="kimi", model_calls=1, session_id="s", request_id=f"seed-{n}", thread_id=None,
        prompt_tokens=1000, completion_tokens=100, currency="USD", cost=cost, latency_ms=5.0,
        status="error" if n % 5 == 4 else "ok", error_code="TIMEOUT" if n % 5 == 4 else None,
        trace_id=None,
    )  # fmt: skip


def _rows() -> list[CallLogRow]:
    """Three weeks of calls, more on weekdays: bob's with his laptop key (a hostile name)
    and without a key, on two faces and two models (one of them hostile), and those of a
    principal with a hostile name, on a third face and model."""
    rows, n = [], 0
    for days_ago in range(21):
        for i in range(4 + (days_ago * 5) % 7 + (0 if (TODAY - days_ago) % 7 in (2, 3) else 4)):
            n += 1
            if i % 4 == 3:
                rows.append(_call(n, days_ago, XSS_PRINCIPAL, None, "mcp", "glm-5.1", 3_000_000))
            else:
                rows.append(_call(n, days_ago, "bob", "b0b0b0b0b0b0" if i % 2 else None,
                                  "openai" if i % 2 else "ws",
                                  XSS_MODEL if i % 3 == 1 else "kimi-k2.6",
                                  (n % 7 + 1) * 10_000_000))  # fmt: skip
    return rows


ROWS = _rows()


def _count(**match: Any) -> str:
    return str(sum(1 for r in ROWS if all(getattr(r, k) == v for k, v in match.items())))


@pytest.fixture(scope="module")
def seeded(live: Any) -> None:
    store = live.app.services.store

    async def seed() -> None:
        await store.put_key(KeyRecord(
            id="b0b0b0b0b0b0", secret_hash="0" * 64, principal="bob", scopes=None, budget=None,
            rate_per_min=None, models=None, expires_at=None, created_at=time.time(),
            name=XSS_KEY,
        ))  # fmt: skip
        await store.record_calls(ROWS)

    live.run(seed())


def test_the_operator_sees_everyones_usage_as_charts_with_tables(live, browser, seeded):
    alice = Visitor(browser, live.base, height=1200)
    try:
        alice.sign_in(ALICE, "/console/admin/usage")
        page = alice.page
        # One stacked chart of calls and one of cost per day, then key, principal, model, face.
        assert page.locator("section.usage-days svg.chart").count() == 2
        for name in ("keys", "principals", "models", "faces"):
            section = page.locator(f"section.usage-{name}")
            assert section.locator("svg.chart").count() >= 1, name
            assert section.locator("tbody tr").count() >= 1, name
        text = page.locator("main").inner_text()
        # Stored names are text on the page, never markup that runs.
        assert XSS_KEY in text and XSS_MODEL in text and XSS_PRINCIPAL in text
        assert page.evaluate("window.__xss") is None
        keys = page.locator("section.usage-keys tbody tr")
        bob_key = keys.filter(has_text="b0b0b0b0b0b0").inner_text().split("\t")
        assert bob_key[1] == _count(key_id="b0b0b0b0b0b0")
        faces = dict(
            (row.split("\t")[0], row.split("\t")[1])
            for row in page.locator("section.usage-faces tbody tr").all_inner_texts()
        )
        assert faces == {face: _count(face=face) for face in ("openai", "ws", "mcp")}
        totals = page.locator("table.usage-totals tbody tr").first.inner_text().split("\t")
        assert totals[:3] == ["USD", str(len(ROWS)), _count(status="error")]
        alice.shot("usage")

        # Split the days by face instead: the legend and the day table name the faces.
        page.select_option("#u-split", "face")
        page.select_option("#u-days", "7")
        page.click("form.usage button[type=submit]")
        page.wait_for_url("**/console/admin/usage?*split=face*")
        table = page.locator("section.usage-days").first
        table.locator("summary").click()  # the days' table, folded under its chart
        heads = table.locator("thead th").all_inner_texts()
        assert set(heads) == {"Day", "openai", "ws", "mcp", "Total"}
        days = table.locator("tbody th").all_inner_texts()
        assert 0 < len(days) <= 7
        assert alice.problems == []
    finally:
        alice.close()


def test_a_person_sees_only_their_own_usage(live, browser, seeded):
    bob = Visitor(browser, live.base)
    try:
        bob.sign_in(BOB, "/console/usage")
        assert bob.page.locator("a[href='/console/admin/usage']").count() == 0
        text = bob.page.locator("main").inner_text()
        assert "Your usage" in text and XSS_KEY in text
        # Carol's calls (the hostile principal, model glm-5.1, face mcp) are not here.
        assert XSS_PRINCIPAL not in text and "glm-5.1" not in text and "mcp" not in text
        assert bob.page.locator("section.usage-principals").count() == 0
        totals = bob.page.locator("table.usage-totals tbody tr").first.inner_text().split("\t")
        assert totals[1] == _count(principal="bob")
        # Everyone's page by URL: refused, with nothing of it.
        response = bob.go("/console/admin/usage")
        assert response.status == 403
        assert bob.page.locator("section.usage-keys").count() == 0
        response = bob.go("/console/admin/usage?days=7&split=face")
        assert response.status == 403
        assert bob.page.evaluate("window.__xss") is None
    finally:
        bob.close()


def test_a_period_that_cannot_be_shown_is_refused_by_name(live, browser, seeded):
    alice = Visitor(browser, live.base)
    try:
        alice.sign_in(ALICE, "/console/usage")
        for query, words in (
            ("days=abc", "days is a whole number of days"),
            ("days=0", "days counts whole UTC days"),
            ("split=tool", "split is model or face"),
            ("since=2026-11-01T12:00", "give a date"),
            ("since=2020-01-01&until=2026-01-01", "at most 366 days"),
            ("since=2026-11-02&until=2026-11-01", "the period is empty"),
        ):
            response = alice.go(f"/console/admin/usage?{query}")
            assert response.status == 400, query
            assert words in alice.page.locator("main").inner_text(), query
        # A period by dates: the days between them, the last one not included.
        first = time.strftime("%Y-%m-%d", time.gmtime((TODAY - 3) * DAY))
        end = time.strftime("%Y-%m-%d", time.gmtime((TODAY - 1) * DAY))
        assert alice.go(f"/console/admin/usage?since={first}&until={end}").status == 200
        days = alice.page.locator("section.usage-days").first.locator("tbody th")
        assert [d.strip() for d in days.all_text_contents()] == [
            time.strftime("%Y-%m-%d", time.gmtime((TODAY - d) * DAY)) for d in (3, 2)
        ]
    finally:
        alice.close()


def test_a_stacked_chart_escapes_its_names_and_sums_the_rest_as_other() -> None:
    series = [(f"<m{i}>", [Decimal(i + 1), Decimal(0)]) for i in range(10)]
    svg = str(stacked_chart("c", "t <b>", ["2026-11-01", "2026-11-02"], series, "USD"))
    assert "<m" not in svg.replace("&lt;m", "") and "&lt;m9&gt;" in svg
    assert "<b>" not in svg and svg.count("<rect") == 8 + 8  # 7 kept and other; a legend
    assert ">other</text>" in svg and "2026-11-01, other: 6 USD" in svg
