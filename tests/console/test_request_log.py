"""The request log end to end: a call on each face (WebSocket, MCP over HTTP, a model
face) and refused calls leave one row each with their face, client, models, tokens and
error codes; the console's Requests page filters, pages by cursor, tails, exports CSV
with formula cells made inert and opens a call's detail; a non-operator is refused;
``exai requests`` prints the same rows."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
from typing import Any

import httpx
import pytest

from exai.client import ExaiClient
from exai.store.call_log import CallFilter
from tests.console.conftest import ALICE, BOB
from tests.console.test_http import console, sign_in
from tests.web.helpers import MODERN, tools_call

EVIL_CLIENT = '=HYPERLINK("http://evil.example")'


async def _flush(http: httpx.AsyncClient) -> None:
    await http.daemon.services.ledger.flush()  # type: ignore[attr-defined]


async def _calls_on_every_face(http: httpx.AsyncClient) -> None:
    daemon: Any = http.daemon  # type: ignore[attr-defined]
    async with ExaiClient(daemon.url, BOB, client_name=EVIL_CLIENT) as client:
        assert (await client.call("echo", {"text": "hi"})).error is None
        missing = await client.call("no_such_tool", {})
        assert missing.error is not None and missing.error.code.value == "TOOL_NOT_FOUND"
        invalid = await client.call("echo", {"nope": 1})
        assert invalid.error is not None and invalid.error.code.value == "VALIDATION_ERROR"
    async with ExaiClient(daemon.url, BOB, client_name="exai-shim") as shim:  # MCP over stdio
        assert (await shim.call("echo", {"text": "via the shim"})).error is None
    bearer = {"authorization": f"Bearer {BOB}"}
    mcp_headers = {**bearer, **MODERN, "user-agent": "claude-code/2.1.330"}
    mcp = await http.post("/mcp", json=tools_call("echo", text="via mcp"), headers=mcp_headers)
    assert mcp.status_code == 200, mcp.text
    body = {"model": "kimi-k2.6", "messages": [{"role": "user", "content": "hello"}]}
    answered = await http.post("/v1/chat/completions", json=body,
                               headers={**bearer, "user-agent": "qwencode/0.24.4"})  # fmt: skip
    assert answered.status_code == 200, answered.text
    await _flush(http)


async def test_each_face_leaves_one_row_per_call_that_the_requests_page_filters(tmp_path, emulator):
    async with console(tmp_path, emulator) as http:
        await _calls_on_every_face(http)
        store = http.daemon.services.store  # type: ignore[attr-defined]
        rows = {r.id: r for r in await store.call_log_page(CallFilter(), limit=100)}
        by_face = {(r.face, r.tool, r.status, r.error_code) for r in rows.values()}
        assert ("ws", "echo", "ok", None) in by_face
        assert ("ws", "no_such_tool", "error", "TOOL_NOT_FOUND") in by_face
        assert ("ws", "echo", "error", "VALIDATION_ERROR") in by_face
        assert ("mcp", "echo", "ok", None) in by_face
        assert {r.client for r in rows.values() if r.face == "mcp"} == {
            "exai-shim", "claude-code 2.1.330",
        }  # fmt: skip
        assert ("openai", "completion", "ok", None) in by_face
        model_call = next(r for r in rows.values() if r.face == "openai")
        assert model_call.client == "qwen-code 0.24.4"
        assert model_call.model_asked == "kimi-k2.6" and model_call.model == "kimi-k2.6"
        assert model_call.prompt_tokens > 0 and model_call.completion_tokens > 0
        assert model_call.currency == "USD" and model_call.cost > 0
        assert model_call.principal == "bob"
        assert {r.client for r in rows.values() if r.face == "ws"} == {EVIL_CLIENT}

        await sign_in(http, ALICE)
        page = await http.get("/console/admin/requests")
        assert page.status_code == 200
        assert page.text.count('<tr data-id="') == len(rows)
        assert "TOOL_NOT_FOUND" in page.text and "kimi-k2.6" in page.text
        errors = await http.get("/console/admin/requests", params={"status": "error"})
        assert errors.text.count('<tr data-id="') == 2
        faced = await http.get("/console/admin/requests",
                               params={"face": "mcp", "client": "claude-code 2.1.330"})  # fmt: skip
        assert faced.text.count('<tr data-id="') == 1
        coded = await http.get("/console/admin/requests",
                               params={"error_code": "VALIDATION_ERROR"})  # fmt: skip
        assert coded.text.count('<tr data-id="') == 1
        future = await http.get("/console/admin/requests", params={"since": "2999-01-01"})
        assert "No calls match." in future.text
        bad = await http.get("/console/admin/requests", params={"since": "yesterday-ish"})
        assert bad.status_code == 400

        # Keyset pages: two rows a page would need a smaller page; the cursor is in the link.
        older = re.search(r'href="([^"]*before=[^"]*)"', page.text)
        assert older is None  # six rows fit one page of fifty

        # The call's detail: its audit events and the way back.
        ident = re.search(r'<tr data-id="(\d+)"', faced.text).group(1)
        for _ in range(100):  # the trail writes its outbox in the background
            detail = await http.get(f"/console/admin/requests/{ident}")
            assert detail.status_code == 200
            if "call_finished" in detail.text:
                break
            await asyncio.sleep(0.05)
        assert "call_finished" in detail.text and "claude-code" in detail.text
        assert (await http.get("/console/admin/requests/999999")).status_code == 404


async def test_the_tail_pages_csv_and_cli_show_the_same_rows_and_others_are_refused(
    tmp_path, emulator, capsys, monkeypatch
):
    async with console(tmp_path, emulator) as http:
        await _calls_on_every_face(http)
        await sign_in(http, ALICE)
        page = await http.get("/console/admin/requests")
        top = re.search(r'data-top="(\d+)"', page.text).group(1)
        empty = await http.get("/console/admin/requests", params={"rows": 1, "after": top})
        assert empty.text.strip() == "" and empty.headers["x-exai-top"] == top
        daemon: Any = http.daemon  # type: ignore[attr-defined]
        async with ExaiClient(daemon.url, BOB, client_name="late") as client:
            await client.call("echo", {"text": "later"})
        await _flush(http)
        tail = await http.get("/console/admin/requests", params={"rows": 1, "after": top})
        assert tail.text.count('<tr data-id="') == 1 and "late" in tail.text
        assert int(tail.headers["x-exai-top"]) > int(top)
        filtered = await http.get("/console/admin/requests",
                                  params={"rows": 1, "after": top, "face": "openai"})  # fmt: skip
        assert filtered.text.strip() == ""

        # Keyset paging through the reads the page uses: pages of two, no repeats.
        principal = daemon.core.auth.authenticate(ALICE)
        seen, before = [], ""
        while True:
            found = await daemon.core.reads.request_log(principal, {}, before=before, limit=2)
            seen += [r["id"] for r in found["rows"]]
            if not found["next"]:
                break
            before = found["next"]
        assert len(seen) == len(set(seen)) == 7

        exported = await http.get("/console/admin/requests.csv", params={"face": "ws"})
        assert exported.status_code == 200
        assert exported.headers["content-type"].startswith("text/csv")
        assert "attachment" in exported.headers["content-disposition"]
        table = list(csv.DictReader(io.StringIO(exported.text)))
        assert {r["tool"] for r in table} == {"echo", "no_such_tool"} and len(table) == 4
        # A formula a spreadsheet would run is made inert; the other cells are as they were.
        assert {r["client"] for r in table} == {"'" + EVIL_CLIENT, "late"}
        every = await http.get("/console/admin/requests.csv")
        assert len(list(csv.DictReader(io.StringIO(every.text)))) == 7

        # exai requests reads the same store (the daemon's SQLite file).
        def main(argv: list[str]) -> int:  # the command runs its own event loop
            from exai.cli.main import main as exai

            return exai(argv)

        capsys.readouterr()
        monkeypatch.setenv("EXAI_DATA_DIR", str(daemon.settings.data_dir))
        assert await asyncio.to_thread(main, ["requests", "--status", "error", "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert sorted(r["error_code"] for r in shown["rows"]) == [
            "TOOL_NOT_FOUND", "VALIDATION_ERROR",
        ]  # fmt: skip
        assert await asyncio.to_thread(main, ["requests", "--face", "ws", "--csv"]) == 0
        assert "'=HYPERLINK" in capsys.readouterr().out
        assert await asyncio.to_thread(main, ["requests", "-n", "3"]) == 0
        out = capsys.readouterr().out
        assert "older: --before " in out and "late" in out
        # The same command under `exai audit`, where an operator looks too.
        assert await asyncio.to_thread(main, ["audit", "requests", "-n", "3"]) == 0
        assert capsys.readouterr().out == out

        # A principal without the operator's view: refused everywhere, shown nothing.
        async with httpx.AsyncClient(base_url=str(http.base_url)) as other:
            await sign_in(other, BOB)
            for path in ("/console/admin/requests", "/console/admin/requests.csv",
                         "/console/admin/requests/1",
                         "/console/admin/requests?rows=1&after=0"):  # fmt: skip
                refused = await other.get(path)
                assert refused.status_code == 403 and "not an operator" in refused.text, path
                assert "HYPERLINK" not in refused.text and "kimi-k2.6" not in refused.text
            page = await other.get("/console/threads")
            assert "/console/admin/requests" not in page.text


async def test_a_row_links_to_its_trace_and_its_call_to_the_turn_it_stored(tmp_path, emulator):
    from exai import tracing
    from tests.tracing.helpers import install_tracing

    provider, _ = install_tracing(content=False)
    url = "http://127.0.0.1:6006/projects/default/traces/{trace_id}"
    try:
        async with console(tmp_path, emulator, trace_url=url) as http:
            daemon: Any = http.daemon  # type: ignore[attr-defined]
            async with ExaiClient(daemon.url, ALICE) as alice:
                first = await alice.call("chat", {"prompt": "trace me", "model": "kimi-k2.6"})
            trace_id = (first.metadata.model_extra or {})["trace_id"]
            thread = first.metadata.continuation_id
            await _flush(http)
            await sign_in(http, ALICE)
            page = await http.get("/console/admin/requests", params={"trace_id": trace_id})
            link = f'href="{url.replace("{trace_id}", trace_id)}"'
            assert page.text.count('<tr data-id="') == 1 and link in page.text
            ident = re.search(r'<tr data-id="(\d+)"', page.text).group(1)
            detail = await http.get(f"/console/admin/requests/{ident}")
            assert link in detail.text
            assert f'href="/console/threads/{thread}#m' in detail.text  # the turn it stored
            assert (await http.get(f"/console/threads/{thread}")).status_code == 200
    finally:
        tracing.reset()
        provider.shutdown()


async def test_the_anthropic_and_responses_faces_leave_rows_through_the_real_sdks(
    tmp_path, emulator
):
    """The official SDKs as agents use them: each call one row with its face, the SDK
    as client, the models, tokens and cost; a refused model is an error row."""
    import anthropic
    import openai

    async with console(tmp_path, emulator) as http:
        base = str(http.base_url).rstrip("/")
        claude = anthropic.AsyncAnthropic(base_url=base, api_key=BOB, max_retries=0)
        message = await claude.messages.create(
            model="kimi-k2.6", max_tokens=64, messages=[{"role": "user", "content": "hello"}]
        )
        assert [b.text for b in message.content if b.type == "text"]
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=BOB, max_retries=0)
        response = await sdk.responses.create(model="glm-5.1", input="hello")
        assert response.output_text
        with pytest.raises(openai.NotFoundError):
            await sdk.responses.create(model="no-such-model", input="hello")
        await _flush(http)

        store = http.daemon.services.store  # type: ignore[attr-defined]
        rows = await store.call_log_page(CallFilter(), limit=100)
        by_face = {r.face: r for r in rows if r.status == "ok"}
        messages, responses = by_face["anthropic"], by_face["responses"]
        assert messages.client == f"Anthropic SDK {anthropic.__version__}"
        assert responses.client == f"OpenAI SDK {openai.__version__}"
        for row, model in ((messages, "kimi-k2.6"), (responses, "glm-5.1")):
            assert (row.tool, row.principal, row.model_asked, row.model) == (
                "completion", "bob", model, model,
            )  # fmt: skip
            assert row.prompt_tokens > 0 and row.completion_tokens > 0
            assert row.currency == "USD" and row.cost > 0 and row.latency_ms >= 0
        (refused,) = [r for r in rows if r.status == "error"]
        assert (refused.face, refused.model_asked) == ("responses", "no-such-model")
        assert refused.error_code and refused.cost in (None, 0)
