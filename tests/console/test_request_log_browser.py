"""The Requests page in a real browser (Debian's Chromium): filter, open a call, the
export link, the live tail; a client's name and a model's name carrying markup stay text."""

from __future__ import annotations

from typing import Any

import pytest

from exai.client import ExaiClient
from tests.console.conftest import ALICE, BOB
from tests.console.test_browser import Visitor

pytestmark = pytest.mark.timeout(120)

XSS_CLIENT = "<img src=x onerror=window.__xss=1>"
XSS_MODEL = "</td><script>window.__xss=2</script>"


def _calls(live: Any, client_name: str, arguments: list[tuple[str, dict[str, Any]]]) -> None:
    async def go() -> None:
        async with ExaiClient(live.app.url, BOB, client_name=client_name) as client:
            for tool, args in arguments:
                await client.call(tool, args)
        await live.app.services.ledger.flush()

    live.run(go())


def test_the_requests_page_filters_opens_a_call_exports_and_tails_with_markup_inert(
    live, browser, emulator
):
    _calls(live, XSS_CLIENT, [("echo", {"text": "hi"}),
                              ("chat", {"prompt": "x", "model": XSS_MODEL})])  # fmt: skip
    alice = Visitor(browser, live.base)
    try:
        alice.sign_in(ALICE, "/console/admin/requests")
        rows = alice.page.locator("#request-rows tr[data-id]")
        assert rows.count() >= 2
        text = alice.page.locator("#request-rows").inner_text()
        assert XSS_CLIENT in text and XSS_MODEL in text  # shown as text, not run
        assert alice.page.evaluate("window.__xss") is None
        alice.shot("requests")

        # Filter by a column through the form: the query is in the URL, the rows match.
        alice.page.fill("#f-tool", "echo")
        alice.page.click("#requests-filter button[type=submit]")
        alice.page.wait_for_url("**/console/admin/requests?*tool=echo*")
        assert {c.strip() for c in rows.locator("td:nth-child(4)").all_inner_texts()} == {"echo"}
        export = alice.page.locator("#requests-csv")
        assert "tool=echo" in (export.get_attribute("href") or "")
        csv = alice.page.request.get(live.base + (export.get_attribute("href") or ""))
        assert csv.status == 200 and csv.headers["content-type"].startswith("text/csv")
        lines = csv.text().strip().splitlines()
        assert len(lines) == 2 and ",echo," in lines[1]

        # A call written after the page was drawn appears on top without a reload.
        alice.go("/console/admin/requests?face=ws")
        before = rows.count()
        _calls(live, "late-client", [("echo", {"text": "later"})])
        rows.nth(before).wait_for(timeout=15_000)  # polled every 3 s by the page's script
        assert "late-client" in rows.first.inner_text()

        # A row opens the call's detail: its audit events and the way back.
        rows.first.locator("td:first-child a").click()
        alice.page.wait_for_url("**/console/admin/requests/*")
        assert "late-client" in alice.page.locator("dl.call").inner_text()
        alice.page.wait_for_selector("#call-events")
        alice.shot("request-detail")
        assert alice.page.evaluate("window.__xss") is None
        assert alice.problems == []
    finally:
        alice.close()


def test_a_non_operator_cannot_open_the_requests_page(live, browser):
    bob = Visitor(browser, live.base)
    try:
        bob.sign_in(BOB)
        assert bob.page.locator("a[href='/console/admin/requests']").count() == 0
        response = bob.go("/console/admin/requests")
        assert response.status == 403
        assert bob.page.locator("#request-rows").count() == 0
    finally:
        bob.close()
