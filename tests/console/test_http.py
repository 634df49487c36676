"""The console over plain HTTP: the guard's cookie path, sign-in, CSRF, the throttle,
fork and export, and the link a job's notification carries."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from exai import tracing
from exai.auth import issue_token
from exai.client import ExaiClient
from tests.conftest import running_daemon
from tests.console.conftest import ALICE, BOB, console_settings
from tests.console.live import NtfyStandIn
from tests.tracing.helpers import install_tracing

SECRET = "console-jwt-secret-0123456789abcdef"


@asynccontextmanager
async def console(tmp_path: Any, emulator: Any, **overrides: Any) -> AsyncIterator[Any]:
    settings = console_settings(tmp_path, emulator, jwt_secret=SECRET, **overrides)
    async with running_daemon(settings) as daemon:
        base = f"http://127.0.0.1:{daemon.web.port}"
        async with httpx.AsyncClient(base_url=base, follow_redirects=False) as http:
            http.daemon = daemon  # type: ignore[attr-defined]
            yield http


async def sign_in(http: httpx.AsyncClient, token: str, then: str = "/console/threads") -> str:
    """Sign in as a browser would; returns the session's CSRF token."""
    form = await http.get("/console/login", params={"next": then})
    login_token = re.search(r'name="login_token" value="([^"]+)"', form.text).group(1)
    done = await http.post(
        "/console/login", data={"login_token": login_token, "token": token, "next": then}
    )
    assert done.status_code == 303, done.text
    assert done.headers["location"] == then
    page = await http.get(then)
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


async def test_a_console_page_without_a_session_goes_to_sign_in_and_comes_back(tmp_path, emulator):
    async with console(tmp_path, emulator) as http:
        page = await http.get("/console/jobs?x=1")
        assert page.status_code == 303
        assert page.headers["location"] == "/console/login?next=%2Fconsole%2Fjobs%3Fx%3D1"
        posted = await http.post("/console/memories", data={"content": "x"})
        assert posted.status_code == 401
        assert posted.json()["error"]["code"] == "UNAUTHORIZED"
        assert (await http.get("/console/login")).status_code == 200  # open
        assert (await http.get("/console/static/console.js")).status_code == 200  # open
        await sign_in(http, ALICE, "/console/jobs?x=1")


async def test_a_bearer_token_does_not_open_the_console_nor_the_cookie_other_routes(
    tmp_path, emulator
):
    async with console(tmp_path, emulator) as http:
        bearer = {"authorization": f"Bearer {ALICE}"}
        assert (await http.get("/console/threads", headers=bearer)).status_code == 303
        assert (await http.get("/v1/models", headers=bearer)).status_code == 200
        await sign_in(http, ALICE)
        assert (await http.get("/console/threads")).status_code == 200
        assert (await http.get("/v1/models")).status_code == 401  # the cookie is not a bearer
        mcp = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert mcp.status_code == 401


async def test_sign_in_sets_a_strict_httponly_cookie_for_one_principal(tmp_path, emulator):
    async with console(tmp_path, emulator) as http:
        form = await http.get("/console/login")
        assert "HttpOnly; SameSite=Strict" in form.headers["set-cookie"]
        login_token = re.search(r'name="login_token" value="([^"]+)"', form.text).group(1)
        done = await http.post("/console/login", data={"login_token": login_token, "token": BOB})
        cookie = next(
            c for c in done.headers.get_list("set-cookie") if c.startswith("exai_console=")
        )
        assert "; Path=/console; " in cookie and "; HttpOnly; SameSite=Strict" in cookie
        assert int(re.search(r"Max-Age=(\d+)", cookie).group(1)) <= 8 * 3600
        assert BOB not in cookie  # the credential is never kept
        assert (await http.get("/console/session")).json() == {"principal": "bob"}
        page = await http.get("/console/threads")
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert page.headers["cache-control"] == "no-store"


async def test_a_jwt_session_ends_when_the_jwt_does_and_its_admin_scope_opens_the_operator_view(
    tmp_path, emulator
):
    async with console(tmp_path, emulator, admin_principals=[]) as http:
        operator = issue_token(SECRET, "carol", scopes=["exai:admin", "chat"], ttl_s=60)
        await sign_in(http, operator)
        cookie = http.cookies.get("exai_console")
        assert cookie
        assert (await http.get("/console/admin/health")).status_code == 200
        http.cookies.clear()
        person = issue_token(SECRET, "dave", scopes=["*"], ttl_s=60)
        form = await http.get("/console/login")
        login_token = re.search(r'name="login_token" value="([^"]+)"', form.text).group(1)
        done = await http.post("/console/login", data={"login_token": login_token, "token": person})
        max_age = int(
            re.search(
                r"exai_console=[^;]+; Path=/console; Max-Age=(\d+)", done.headers["set-cookie"]
            ).group(1)
        )
        assert max_age <= 60  # not the console's 8 hours: the JWT's minute
        refused = await http.get("/console/admin/health")
        assert refused.status_code == 403 and "not an operator" in refused.text


async def test_a_sign_in_form_from_elsewhere_is_refused(tmp_path, emulator):
    async with console(tmp_path, emulator) as http:
        no_form = await http.post("/console/login", data={"login_token": "guess", "token": ALICE})
        assert no_form.status_code == 403 and "exai_console=" not in no_form.headers.get(
            "set-cookie", ""
        )
        foreign = await http.post(
            "/console/login", data={"token": ALICE}, headers={"origin": "https://evil.example"}
        )
        assert foreign.status_code == 403


async def test_failed_sign_ins_share_the_login_throttle_with_every_face(tmp_path, emulator):
    async with console(
        tmp_path, emulator, auth_failures_burst=2, auth_failures_per_min=0.01
    ) as http:
        for _ in range(2):
            form = await http.get("/console/login")
            token = re.search(r'name="login_token" value="([^"]+)"', form.text).group(1)
            wrong = await http.post("/console/login", data={"login_token": token, "token": "wrong"})
            assert wrong.status_code == 401
        # The allowance is spent for this address: the right token is refused unchecked,
        # on the console and on the bearer faces alike.
        form = await http.get("/console/login")
        token = re.search(r'name="login_token" value="([^"]+)"', form.text).group(1)
        right = await http.post("/console/login", data={"login_token": token, "token": ALICE})
        assert right.status_code == 401 and "too many failed logins" in right.text
        bearer = await http.get("/v1/models", headers={"authorization": f"Bearer {ALICE}"})
        assert bearer.status_code == 401 and "too many failed logins" in bearer.text


async def test_signing_out_ends_the_session(tmp_path, emulator):
    async with console(tmp_path, emulator) as http:
        csrf = await sign_in(http, ALICE)
        cookie = http.cookies.get("exai_console")
        refused = await http.post("/console/logout", data={})
        assert refused.status_code == 403  # no CSRF token: still signed in
        assert (await http.get("/console/threads")).status_code == 200
        out = await http.post("/console/logout", data={"csrf": csrf})
        assert out.status_code == 303 and "Max-Age=0" in out.headers["set-cookie"]
        http.cookies.set("exai_console", cookie, domain="127.0.0.1", path="/console")
        assert (await http.get("/console/threads")).status_code == 303  # the old cookie is dead


async def test_a_thread_forks_and_exports_and_stays_its_owners(tmp_path, emulator):
    async with console(tmp_path, emulator) as http:
        daemon = http.daemon  # type: ignore[attr-defined]
        async with ExaiClient(daemon.url, ALICE) as alice:
            first = await alice.call("chat", {"prompt": "fork me"})
        thread = first.metadata.continuation_id
        csrf = await sign_in(http, ALICE)
        forked = await http.post(f"/console/threads/{thread}/fork", data={"csrf": csrf})
        assert forked.status_code == 303
        copy = forked.headers["location"].rsplit("/", 1)[1]
        assert copy != thread
        page = await http.get(f"/console/threads/{copy}")
        assert (
            "fork me" in page.text and f'Fork of <a href="/console/threads/{thread}"' in page.text
        )
        export = await http.get(f"/console/threads/{thread}/export")
        lines = export.text.splitlines()
        assert export.headers["content-disposition"].startswith("attachment;")
        assert '"type": "thread"' in lines[0] and len(lines) == 3
        async with ExaiClient(daemon.url, BOB) as bob:
            stolen = await bob.call("fork", {"continuation_id": thread})
        assert stolen.error is not None and stolen.error.code.value == "CONVERSATION_NOT_FOUND"


async def test_a_job_notification_links_to_the_thread_at_the_public_url(tmp_path, emulator):
    ntfy = NtfyStandIn().start()
    try:
        async with console(tmp_path, emulator, public_url="https://exai.example.com/") as http:
            daemon = http.daemon  # type: ignore[attr-defined]
            async with ExaiClient(daemon.url, ALICE) as alice:
                job = await alice.call(
                    "schedule",
                    {
                        "tool": "echo",
                        "arguments": {"text": "ping"},
                        "when": "every 1h",
                        "notify_url": ntfy.url("t"),
                    },
                )
                job_id = job.metadata.model_extra["job"]["id"]
                await alice.call("jobs", {"id": job_id, "action": "run_now"})
            for _ in range(200):
                if ntfy.received:
                    break
                await asyncio.sleep(0.05)
            body = ntfy.received[0].body
            link = re.search(r"open: (\S+)", body).group(1)
            assert re.fullmatch(r"https://exai\.example\.com/console/threads/[0-9a-f-]{36}", link)
            assert ntfy.received[0].headers["click"] == link
            # Pages are requested from the public address: its origin is the console's own.
            form = await http.get("/console/login", headers={"origin": "https://exai.example.com"})
            assert form.status_code == 200
            assert "; Secure" in form.headers["set-cookie"]  # served over https there
            other = await http.get("/console/login", headers={"origin": "https://evil.example"})
            assert other.status_code == 403
    finally:
        ntfy.stop()


@pytest.mark.parametrize(
    "path", ["/console/threads", "/console/jobs", "/console/memories", "/console/logout"]
)
async def test_every_state_change_needs_the_csrf_token(tmp_path, emulator, path):
    async with console(tmp_path, emulator) as http:
        await sign_in(http, ALICE)
        refused = await http.post(
            path,
            data={
                "prompt": "x",
                "content": "x",
                "tool": "chat",
                "when": "every 1h",
                "csrf": "not-the-token",
            },
        )
        assert refused.status_code == 403 and "CSRF" in refused.text
        assert (await http.get("/console/threads")).status_code == 200  # still signed in


async def test_a_browser_that_leaves_a_streamed_reply_cancels_its_call(tmp_path, emulator):
    async with console(tmp_path, emulator) as http:
        daemon = http.daemon  # type: ignore[attr-defined]
        async with ExaiClient(daemon.url, ALICE) as alice:
            first = await alice.call("chat", {"prompt": "a thread to continue"})
        csrf = await sign_in(http, ALICE)
        emulator.script({"latency_ms": 5_000})  # a model that would answer in 5 s
        asked = len(emulator.requests)
        url = f"/console/threads/{first.metadata.continuation_id}/continue"
        async with http.stream(
            "POST",
            url,
            data={"csrf": csrf, "prompt": "slow one"},
            headers={"accept": "text/event-stream"},
        ) as streamed:
            assert streamed.status_code == 200
            for _ in range(200):  # until the model has the request
                if len(emulator.requests) > asked:
                    break
                await asyncio.sleep(0.05)
            assert daemon.core.in_flight() == 1
        # The browser went away: the call is cancelled before the model answers, and its
        # turn is never stored (had it run on, the next call would see 6 messages).
        for _ in range(200):
            if daemon.core.in_flight() == 0:
                break
            await asyncio.sleep(0.05)
        assert daemon.core.in_flight() == 0
        async with ExaiClient(daemon.url, ALICE) as alice:
            history = await alice.call(
                "chat", {"prompt": "and now?", "continuation_id": first.metadata.continuation_id}
            )
        assert "(saw 4 messages)" in history.outputs[0].text  # the cancelled turn was not stored


async def test_a_turn_links_to_its_trace(tmp_path, emulator):
    """With tracing on, each turn names its call's trace, as a link into the tracing UI
    when EXAI_TRACE_URL says where that is."""
    provider, _ = install_tracing(content=False)
    url = "http://127.0.0.1:6006/projects/default/traces/{trace_id}"
    try:
        async with console(tmp_path, emulator, trace_url=url) as http:
            daemon = http.daemon  # type: ignore[attr-defined]
            async with ExaiClient(daemon.url, ALICE) as alice:
                first = await alice.call("chat", {"prompt": "trace me"})
            trace_id = (first.metadata.model_extra or {})["trace_id"]
            thread = first.metadata.continuation_id
            await sign_in(http, ALICE)
            for _ in range(100):  # cost rows are written by the ledger's background task
                page = await http.get(f"/console/threads/{thread}")
                if trace_id in page.text:
                    break
                await asyncio.sleep(0.05)
        assert f'href="{url.replace("{trace_id}", trace_id)}"' in page.text
    finally:
        tracing.reset()
        provider.shutdown()


async def test_the_jobs_page_says_when_a_tokens_scopes_are_why_no_job_can_be_made(
    tmp_path, emulator
):
    async with console(tmp_path, emulator, tool_profile="full") as http:
        chat_only = issue_token(SECRET, "erin", scopes=["chat"], ttl_s=60)
        await sign_in(http, chat_only, "/console/jobs")
        page = (await http.get("/console/jobs")).text
    assert "Your token&#39;s scopes do not include" in page or "Your token's scopes" in page
    assert "does not offer the job tools" not in page  # the daemon does offer them
