"""The console's Keys page: an operator makes, rotates and revokes keys and sees each
new key once; nobody else reaches the page by navigation, URL or a forged form;
every form needs the session's CSRF token; the secret is in no page after the one
that made it. Over HTTP, and in Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.console.conftest import ALICE, BOB, browser, live  # noqa: F401
from tests.console.test_browser import Visitor

SHOT = Path(__file__).resolve().parents[2] / "build" / "screenshots" / "keys.png"


async def _sign_in(http: httpx.AsyncClient, token: str) -> str:
    form = await http.get("/console/login", params={"next": "/console/threads"})
    login = re.search(r'name="login_token" value="([^"]+)"', form.text)
    assert login is not None
    done = await http.post("/console/login", data={"login_token": login.group(1),
                           "token": token, "next": "/console/threads"})  # fmt: skip
    assert done.status_code == 303
    page = await http.get("/console/threads")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    return csrf.group(1)


def _token_in(html: str) -> str:
    found = re.search(r'id="new-key-token">(exai_[0-9a-f]{12}_[A-Za-z0-9_-]+)<', html)
    assert found is not None, "no key shown"
    return found.group(1)


async def test_an_operator_makes_rotates_and_revokes_keys_and_sees_each_once(live):  # noqa: F811
    async with httpx.AsyncClient(base_url=live.base) as http:
        csrf = await _sign_in(http, ALICE)
        page = await http.get("/console/admin/keys")
        assert page.status_code == 200
        assert 'href="/console/admin/keys"' in page.text  # in the operator's navigation
        grant = {
            "csrf": csrf,
            "principal": "bob",
            "scopes": "chat",
            "budget": "5 USD/day",
            "rate": "60/min",
            "models": "kimi-k2.6",
            "expires": "30d",
            "name": "ci",
        }
        made = await http.post("/console/admin/keys", data=grant)
        assert made.status_code == 200 and made.headers["cache-control"] == "no-store"
        token = _token_in(made.text)
        secret = token.split("_", 2)[2]
        again = await http.get("/console/admin/keys")
        assert secret not in again.text and token.split("_")[1] in again.text
        assert "5 USD/day" in again.text and "60/min" in again.text

        bad = await http.post("/console/admin/keys", data={
            "csrf": csrf, "principal": "bob", "rate": "fast"})  # fmt: skip
        assert bad.status_code == 400 and "rate" in bad.text and "new-key-token" not in bad.text
        forged = await http.post("/console/admin/keys", data={"principal": "mallory"})
        assert forged.status_code == 403 and "CSRF" in forged.text

        key_id = token.split("_")[1]
        changed = await http.post(f"/console/admin/keys/{key_id}/update", data={
            "csrf": csrf, "budget": "9 USD/day", "rate": "", "expires": "90d",
            "models": "kimi-k2.6,glm-5.1", "scopes": "chat"})  # fmt: skip
        assert changed.status_code == 303
        listing = await http.get("/console/admin/keys")
        assert "changed on every daemon" in listing.text and "9 USD/day" in listing.text
        refused = await http.post(f"/console/admin/keys/{key_id}/update",
                                  data={"csrf": csrf, "rate": "fast"})  # fmt: skip
        assert refused.status_code == 400 and "rate" in refused.text
        turned = await http.post(f"/console/admin/keys/{key_id}/rotate", data={"csrf": csrf})
        new = _token_in(turned.text)
        assert new != token and f"replaces {key_id}" in turned.text
        new_id = new.split("_")[1]
        gone = await http.post(f"/console/admin/keys/{new_id}/revoke", data={"csrf": csrf})
        assert gone.status_code == 303
        listing = await http.get("/console/admin/keys")
        assert "revoked on every daemon" in listing.text
        assert secret not in listing.text and new.split("_", 2)[2] not in listing.text
        assert listing.text.count("revoked") >= 2
        models = await http.get("/v1/models", headers={"Authorization": f"Bearer {new}"})
        assert models.status_code == 401


async def test_no_one_else_reaches_the_keys_page(live):  # noqa: F811
    base = live.base
    async with httpx.AsyncClient(base_url=base) as http:
        csrf = await _sign_in(http, BOB)
        threads = await http.get("/console/threads")
        assert "/console/admin/keys" not in threads.text
        assert (await http.get("/console/admin/keys")).status_code == 403
        for path in ["/console/admin/keys", "/console/admin/keys/0123456789ab/revoke",
                     "/console/admin/keys/0123456789ab/rotate",
                     "/console/admin/keys/0123456789ab/update",
                     "/console/admin/keys/jti"]:  # fmt: skip
            forged = await http.post(path, data={"csrf": csrf, "principal": "bob"})
            assert forged.status_code == 403, path
    async with httpx.AsyncClient(base_url=base) as anonymous:
        answer = await anonymous.get("/console/admin/keys")
        assert answer.status_code == 303 and "/console/login" in answer.headers["location"]
        assert (await anonymous.post("/console/admin/keys", data={})).status_code == 401


async def test_an_operator_revokes_a_jwt_by_its_jti_from_the_keys_page(live):  # noqa: F811
    hostile = "<img src=x onerror=alert(1)>"
    async with httpx.AsyncClient(base_url=live.base) as http:
        csrf = await _sign_in(http, ALICE)
        page = await http.get("/console/admin/keys")
        assert 'id="revoke-jti-form"' in page.text
        done = await http.post("/console/admin/keys/jti",
                               data={"csrf": csrf, "jti": "laptop-7", "note": hostile})  # fmt: skip
        assert done.status_code == 303
        listing = await http.get("/console/admin/keys")
        assert "laptop-7 is refused on every daemon" in listing.text
        assert "<code>laptop-7</code>" in listing.text
        assert hostile not in listing.text and "&lt;img src=x" in listing.text
        again = await http.post("/console/admin/keys/jti", data={"csrf": csrf, "jti": "laptop-7"})
        assert "was already revoked" in (await http.get(again.headers["location"])).text
        bad = await http.post("/console/admin/keys/jti", data={"csrf": csrf, "jti": ""})
        assert bad.status_code == 400 and "jti" in bad.text
        forged = await http.post("/console/admin/keys/jti", data={"jti": "other"})
        assert forged.status_code == 403
        listed = await http.get("/admin/revoked-jtis",
                                headers={"Authorization": f"Bearer {ALICE}"})  # fmt: skip
        assert [j["jti"] for j in listed.json()["jtis"]] == ["laptop-7"]
        assert listed.json()["jtis"][0]["note"] == hostile


def test_in_chromium_an_operator_sees_a_new_key_once_and_bob_is_refused(browser, live) -> None:  # noqa: F811
    admin = Visitor(browser, live.base)
    bob = Visitor(browser, live.base)
    try:
        admin.sign_in(ALICE, "/console/admin/keys")
        page = admin.page
        page.fill("#key-principal", "carol")
        page.fill("#key-name", "build agent")
        page.fill("#key-scopes", "chat,completion")
        page.fill("#key-budget", "5 USD/day")
        page.fill("#key-rate", "60/min")
        page.fill("#key-expires", "30d")
        page.click("#new-key-form button[type=submit]")
        token = page.inner_text("#new-key-token")
        assert token.startswith("exai_")
        SHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOT), full_page=True)
        admin.go("/console/admin/keys")
        assert token.split("_", 2)[2] not in page.content()
        assert page.locator("#new-key-token").count() == 0
        assert "build agent" in page.content()
        assert admin.problems == []

        bob.sign_in(BOB, "/console/threads")
        assert bob.page.locator('a[href="/console/admin/keys"]').count() == 0
        answer = bob.go("/console/admin/keys")
        assert answer is not None and answer.status == 403
    finally:
        admin.close()
        bob.close()
