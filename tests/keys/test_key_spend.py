"""What a key spent, apart from its principal: two keys of one principal, a call made with
one of them on a model face; ``/admin/keys`` (which ``exai keys list`` and the console's
Keys page show) gives each key its own spend in its budget's period and currency, and the
principal's whole spend (what the budget is checked against) beside it."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx

from exai.cli.main import main
from tests.keys.test_faces import _console_sign_in
from tests.web.faces import TOKENS, base_url, faces_daemon

ADMIN = {"Authorization": f"Bearer {TOKENS['alice']}"}
ASK = [{"role": "user", "content": "hi"}]


async def test_each_key_shows_its_own_spend_and_its_principals(tmp_path, emulator) -> None:
    async with faces_daemon(tmp_path, emulator, admin_principals=["alice"]) as daemon:
        async with httpx.AsyncClient(base_url=base_url(daemon, "")) as http:
            used, idle = [
                (await http.post("/admin/keys", headers=ADMIN, json={
                    "principal": "carol", "budget": "5 USD/day", "name": name})).json()
                for name in ("used", "idle")
            ]  # fmt: skip
            for _ in range(2):
                answer = await http.post("/v1/chat/completions",
                                         headers={"Authorization": f"Bearer {used['token']}"},
                                         json={"model": "kimi-k2.6", "messages": ASK})  # fmt: skip
                assert answer.status_code == 200, answer.text
            assert daemon.services.ledger is not None
            await daemon.services.ledger.flush()
            listed = (await http.get("/admin/keys", headers=ADMIN)).json()["keys"]
        keys = {k["id"]: k for k in listed}
        mine, other = keys[used["key"]["id"]], keys[idle["key"]["id"]]
        assert Decimal(mine["key_spent"]) > 0 and other["key_spent"] == "0"
        # Both keys name carol, so both show carol's whole spend: the used key's calls.
        assert mine["spent"] == other["spent"] == mine["key_spent"]
        # The console's Keys page shows the same, each key's own first.
        async with httpx.AsyncClient(base_url=base_url(daemon, "")) as browser:
            assert (await _console_sign_in(browser, TOKENS["alice"])).status_code == 303
            page = (await browser.get("/console/admin/keys")).text
        for key, spent in ((mine, mine["key_spent"]), (other, "0")):
            row = page[page.index(f"<code>{key['id']}</code>") :]
            row = row[: row.index("</tr>")]
            assert f'<span class="key-spent">{spent} USD</span>' in row, row
            assert f'<span class="principal-spent">{mine["spent"]}</span>' in row, row


def test_exai_keys_list_has_a_column_for_each(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXAI_STORE_URL", f"sqlite:///{tmp_path / 'keys.sqlite3'}")
    assert main(["keys", "create", "--principal", "bob", "--budget", "2 USD/month"]) == 0
    capsys.readouterr()
    assert main(["keys", "list"]) == 0
    head, row = capsys.readouterr().out.splitlines()
    assert "KEY SPENT" in head and "PRINCIPAL SPENT" in head
    assert row.split()[-6:-2] == ["0", "USD", "0", "USD"]
    assert main(["keys", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert (listed["key_spent"], listed["spent"]) == ("0", "0")
