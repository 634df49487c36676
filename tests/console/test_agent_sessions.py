"""Agent sessions in the console over HTTP: the list marks and filters them, a session
reads as a transcript (tool calls, their results, reasoning, costs, lineage),
continuing one forks it, and they are their principal's alone. Sessions are made by
the real ``anthropic`` and ``openai`` SDKs on the daemon's model faces."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

from exai.client import ExaiClient
from tests.console.agents import anthropic_session, openai_session, script_tool_round, settle
from tests.console.conftest import ALICE, BOB
from tests.console.test_http import console, sign_in

PAYLOAD = "<img src=x onerror=alert(1)>"


def _base(http: Any) -> str:
    return f"http://127.0.0.1:{http.daemon.web.port}"


async def _three_threads(http: Any, emulator: Any) -> dict[str, str]:
    """A Claude-Code-like session (anthropic), an OpenAI SDK session, a chat thread."""
    daemon = http.daemon
    script_tool_round(emulator, {"path": "notes.txt"}, "It says: {last_tool_result}")
    await anthropic_session(_base(http), ALICE, "what is in notes.txt?", "pelican", ref="s-1")
    await openai_session(_base(http), ALICE, [{"role": "user", "content": "plain agent"}], "x")
    async with ExaiClient(daemon.url, ALICE) as alice:
        chat = await alice.call("chat", {"prompt": "a person's own thread"})
    await settle(daemon)
    threads = {t.title: t for t in await daemon.services.store.list_threads("alice")}
    return {
        "anthropic": threads["what is in notes.txt?"].id,
        "openai": threads["plain agent"].id,
        "chat": chat.metadata.continuation_id,
    }


def _listed(html: str) -> list[str]:
    return re.findall(r'<a href="/console/threads/([0-9a-f-]{36})">', html)


async def test_the_list_marks_agent_sessions_and_filters_them_by_kind_and_client(
    tmp_path, emulator
):
    async with console(tmp_path, emulator) as http:
        ids = await _three_threads(http, emulator)
        await sign_in(http, ALICE)
        page = (await http.get("/console/threads")).text
        assert set(_listed(page)) == set(ids.values())
        assert re.search(r'class="badge"[^>]*>Anthropic SDK [\d.]+ · /v1/messages</a>', page)
        assert re.search(r'class="badge"[^>]*>OpenAI SDK [\d.]+ · /v1/chat/completions</a>', page)
        assert page.count('class="badge"') == 2  # the chat thread has none
        assert 'href="/console/threads?kind=agent&amp;client=Anthropic+SDK"' in page
        assert re.search(
            r'<time datetime="\d{4}-\d\d-\d\dT[\d:]+Z" title="[^"]+ UTC">just now', page
        )
        assert len(re.findall(r'<span class="cost">0\.\d+ USD</span>', page)) == 3

        agents = (await http.get("/console/threads?kind=agent")).text
        assert set(_listed(agents)) == {ids["anthropic"], ids["openai"]}
        assert 'aria-current="page">Agent sessions' in agents
        chats = (await http.get("/console/threads?kind=chat")).text
        assert _listed(chats) == [ids["chat"]]
        claude = (await http.get("/console/threads?client=ANTHROPIC")).text
        assert _listed(claude) == [ids["anthropic"]]
        searched = (await http.get("/console/threads?q=notes.txt&kind=agent")).text
        assert _listed(searched) == [ids["anthropic"]]
        none = (await http.get("/console/threads?q=notes.txt&kind=chat")).text
        assert _listed(none) == [] and "No thread of yours mentions" in none
        nobody = (await http.get("/console/threads?client=Codex")).text
        assert _listed(nobody) == [] and "from a client named like “Codex”" in nobody
        odd = (await http.get("/console/threads?kind=%3Cscript%3E")).text  # unknown: all
        assert set(_listed(odd)) == set(ids.values()) and "<script>" not in odd


class _Blocks(HTMLParser):
    """The <details> blocks of a page: their classes, ids and whether they are open."""

    def __init__(self) -> None:
        super().__init__()
        self.details: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "details":
            self.details.append(dict(attrs))


async def test_a_session_reads_as_a_transcript_with_its_tool_calls_results_and_costs(
    tmp_path, emulator
):
    arguments = {"path": "notes.txt", "note": PAYLOAD, "options": {"lines": [1, 2]}}
    answer = "It says: {last_tool_result}\n\n```python\nprint('hi')\n```"
    script_tool_round(emulator, arguments, answer)
    async with console(tmp_path, emulator) as http:
        daemon = http.daemon
        ref = "sess-</code><b>ref</b>"
        await anthropic_session(_base(http), ALICE, f"read it {PAYLOAD}", f"ok {PAYLOAD}", ref=ref)
        # The agent compacted its history: a new thread following the first.
        await anthropic_session(_base(http), ALICE, "Summary: we read notes.", "z", ref=ref)
        await settle(daemon)
        newer, session = await daemon.services.store.list_threads("alice")
        await sign_in(http, ALICE)
        page = (await http.get(f"/console/threads/{session.id}")).text

    assert PAYLOAD not in page and "<b>ref</b>" not in page  # everything untrusted escaped
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "sess-&lt;/code&gt;&lt;b&gt;ref&lt;/b&gt;" in page  # the client's session ref
    assert re.search(r'<span class="badge">Anthropic SDK [\d.]+ · /v1/messages</span>', page)
    blocks = _Blocks()
    blocks.feed(page)
    kinds = [d["class"] for d in blocks.details]
    assert kinds.count("tool-call") == 1 and kinds.count("tool-result") == 1
    assert kinds.count("reasoning") == 2  # the tool round's and the answer's
    assert all("open" not in d for d in blocks.details)  # all collapsed
    call = next(d for d in blocks.details if d["class"] == "tool-call")
    result = next(d for d in blocks.details if d["class"] == "tool-result")
    assert f'<a href="#{result["id"]}">Its result</a>' in page  # each names the other
    assert f'<a href="#{call["id"]}">The call</a>' in page
    call_html = page[page.index(f'id="{call["id"]}"') : page.index(f'id="{result["id"]}"')]
    assert 'Calls <span class="tool-name">read_file</span>' in call_html
    assert "<dt>note</dt>" in call_html and "<dt>options</dt>" in call_html
    assert '<span class="tok-nt">"lines"</span>' in call_html  # a JSON value, highlighted
    result_html = page[page.index(f'id="{result["id"]}"') :]
    assert '<pre class="output">ok &lt;img src=x onerror=alert(1)&gt;</pre>' in result_html
    assert '<span class="tok-nb">print</span>' in page  # the answer's code, highlighted
    assert re.search(r'cost <strong class="cost total">0\.\d+ USD</strong>', page)
    assert len(re.findall(r'<span class="cost">0\.\d+ USD</span>', page)) == 2  # per turn
    assert re.search(r'<span class="tokens">\d+ in / \d+ out tokens</span>', page)
    assert f'Followed by <a href="/console/threads/{newer.id}">' in page
    assert "Continue in a fork — a chat with exai's model, without the agent's tools" in page
    assert "Fork and send" in page


async def test_continuing_an_agent_session_continues_a_fork_and_leaves_the_session_as_it_was(
    tmp_path, emulator
):
    script_tool_round(emulator, {"path": "notes.txt"}, "It says: {last_tool_result}")
    async with console(tmp_path, emulator) as http:
        daemon, store = http.daemon, http.daemon.services.store
        history = await openai_session(
            _base(http), ALICE, [{"role": "user", "content": "read notes"}], "pelican"
        )
        await settle(daemon)
        (session,) = await store.list_threads("alice")
        before = await store.messages(session.id, "alice")
        csrf = await sign_in(http, ALICE)

        posted = await http.post(
            f"/console/threads/{session.id}/continue", data={"csrf": csrf, "prompt": "and then?"}
        )
        assert posted.status_code == 303
        fork_id = posted.headers["location"].rsplit("/", 1)[1]
        async with http.stream(
            "POST",
            f"/console/threads/{session.id}/continue",
            data={"csrf": csrf, "prompt": "streamed"},
            headers={"accept": "text/event-stream"},
        ) as streamed:
            events = (await streamed.aread()).decode()
        done = json.loads(re.search(r"event: done\ndata: (.*)\n", events).group(1))
        assert done["thread"] not in (session.id, fork_id)  # a fork of its own

        assert await store.messages(session.id, "alice") == before  # unchanged
        for copy in (fork_id, done["thread"]):
            fork = await store.get_thread(copy, "alice")
            assert fork.parent_id == session.id and fork.face is None  # the person's chat
            said = [m.content for m in await store.messages(copy, "alice")]
            assert said[: len(before)] == [m.content for m in before]
            assert said[len(before)] in ("and then?", "streamed")
        page = (await http.get(f"/console/threads/{fork_id}")).text
        assert "This is your fork of the agent&#39;s session, which is unchanged." in page
        assert f'Fork of <a href="/console/threads/{session.id}">' in page
        assert "<h2>Continue</h2>" in page and "Fork and send" not in page
        original = (await http.get(f"/console/threads/{session.id}")).text
        assert original.count("Forked into <a") == 2

        # The agent's next request still continues its own thread.
        await openai_session(
            _base(http), ALICE, [*history, {"role": "user", "content": "more"}], ""
        )
        await settle(daemon)
        assert (await store.get_thread(session.id, "alice")).last_seq > before[-1].seq


async def test_another_principals_session_is_not_found_anywhere(tmp_path, emulator):
    script_tool_round(emulator, {"path": "secret.txt"}, "It says: {last_tool_result}")
    async with console(tmp_path, emulator) as http:
        await anthropic_session(_base(http), ALICE, "alice's session", "private", ref="a-1")
        await settle(http.daemon)
        (session,) = await http.daemon.services.store.list_threads("alice")
        csrf = await sign_in(http, BOB)
        for path in ("", "/export"):
            response = await http.get(f"/console/threads/{session.id}{path}")
            assert response.status_code == 404 and "private" not in response.text
        continued = await http.post(
            f"/console/threads/{session.id}/continue", data={"csrf": csrf, "prompt": "x"}
        )
        assert continued.status_code == 404 and "private" not in continued.text
        forked = await http.post(f"/console/threads/{session.id}/fork", data={"csrf": csrf})
        assert forked.status_code == 303  # back, with the fork tool's refusal shown
        shown = await http.get(forked.headers["location"])
        assert shown.status_code == 404 and "CONVERSATION_NOT_FOUND" in shown.text
        for query in ("", "?kind=agent", "?client=anthropic", "?q=alice"):
            assert _listed((await http.get(f"/console/threads{query}")).text) == []
        assert len(await http.daemon.services.store.list_threads("alice")) == 1  # no fork made
