"""The console's pure parts: sessions, sanitizing, charts, and what the pages make of data."""

from __future__ import annotations

import json
from decimal import Decimal
from html.parser import HTMLParser

import pytest

from exai.auth import Principal
from exai.web.console.charts import column_chart, row_chart
from exai.web.console.markdown import MAX_HIGHLIGHTED, highlight, render_markdown
from exai.web.console.sessions import (
    ConsoleSessions,
    cookie_header,
    cookie_value,
    tokens_match,
)
from exai.web.console.transcript import MAX_SHOWN, group_turns, total_cost
from exai.web.console.views import (
    FormError,
    ago,
    client_family,
    iso,
    job_arguments,
    memory_arguments,
    money,
    safe_next,
    session_label,
)

# --- sessions -----------------------------------------------------------------------


def test_a_session_names_one_principal_and_expires():
    sessions = ConsoleSessions(ttl_s=100)
    alice = sessions.sign_in(Principal("alice"), now=1000.0)
    assert sessions.get(alice.id, 1099.0).principal.name == "alice"
    assert sessions.get(alice.id, 1100.0) is None  # expired, and forgotten
    assert sessions.get(alice.id, 1000.0) is None
    assert sessions.get("not-a-session", 1000.0) is None and sessions.get(None, 1.0) is None


def test_a_session_never_outlives_the_jwt_it_was_made_with():
    sessions = ConsoleSessions(ttl_s=3600)
    short = sessions.sign_in(Principal("alice", method="jwt", expires_at=1060.0), now=1000.0)
    assert short.expires_at == 1060.0
    assert sessions.get(short.id, 1061.0) is None


def test_sessions_have_unguessable_distinct_ids_and_csrf_tokens():
    sessions = ConsoleSessions(ttl_s=100)
    made = [sessions.sign_in(Principal("alice"), 0.0) for _ in range(50)]
    secrets_ = {s.id for s in made} | {s.csrf for s in made}
    assert len(secrets_) == 100 and all(len(x) >= 40 for x in secrets_)
    assert all(s.id not in s.public_id for s in made)


def test_expired_sessions_are_swept_when_someone_signs_in():
    sessions = ConsoleSessions(ttl_s=100)
    old = sessions.sign_in(Principal("alice"), now=0.0)
    sessions.sign_in(Principal("bob"), now=150.0)
    assert len(sessions) == 1 and sessions.sign_out(old.id) is None


def test_signing_out_ends_the_session_and_the_oldest_go_past_the_limit():
    sessions = ConsoleSessions(ttl_s=100, max_sessions=2)
    first, second, third = (sessions.sign_in(Principal(n), 0.0) for n in ("a", "b", "c"))
    assert sessions.get(first.id, 1.0) is None and len(sessions) == 2
    assert sessions.sign_out(second.id) is second
    assert sessions.get(second.id, 1.0) is None and sessions.get(third.id, 1.0) is third


def test_csrf_tokens_compare_whole_and_refuse_nothing():
    assert tokens_match("abc", "abc")
    assert (
        not tokens_match("abc", "abd")
        and not tokens_match("abc", "")
        and not tokens_match("abc", None)
    )


def test_the_cookie_is_httponly_samesite_strict_scoped_and_expiring():
    header = cookie_header("exai_console", "v", max_age=60.7)
    assert header == "exai_console=v; Path=/console; Max-Age=60; HttpOnly; SameSite=Strict"
    assert cookie_header("n", "", max_age=-5, secure=True).endswith(
        "Max-Age=0; HttpOnly; SameSite=Strict; Secure"
    )


def test_cookie_values_are_read_from_the_header_and_a_bad_header_is_no_cookie():
    assert cookie_value({"cookie": "a=1; exai_console=xyz; b=2"}, "exai_console") == "xyz"
    assert cookie_value({"cookie": "a=1"}, "exai_console") is None
    assert cookie_value({}, "exai_console") is None
    assert cookie_value({"cookie": 'exai_console="unterminated'}, "exai_console") is None


# --- untrusted text -------------------------------------------------------------------

ATTACKS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "<iframe src=https://evil.example></iframe>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](  javascript:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD4=)",
    "<a href=javascript:alert(1)>x</a>",
    "![i](http://tracker.example/pixel.png)",
    '<div style="background:url(javascript:alert(1))">x</div>',
    "[x](&#106;avascript:alert(1))",
    "<details open ontoggle=alert(1)>",
    "``<script>`` and `</code><script>alert(1)</script>`",
    "```html\n<script>alert(1)</script><img src=x onerror=alert(1)>\n```",
    "```python\n'</span></code><script>alert(1)</script>'\n```",
    '```js" onmouseover="alert(1)\nx\n```',
    '```json\n{"a": "</pre><img src=x onerror=alert(1)>"}\n```',
]


class _Elements(HTMLParser):
    """Every element and attribute a browser would build from the HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


_SAFE_TAGS = {
    "a",
    "span",
    "p",
    "br",
    "hr",
    "strong",
    "em",
    "del",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}


@pytest.mark.parametrize("text", ATTACKS)
def test_markup_in_untrusted_text_never_becomes_live_html(text):
    parser = _Elements()
    parser.feed(str(render_markdown(text)))
    for tag, attrs in parser.found:
        assert tag in _SAFE_TAGS, tag
        if tag == "span":  # a highlighted token, and nothing else
            assert set(attrs) == {"class"} and attrs["class"].startswith("tok-"), attrs
            continue
        assert set(attrs) <= {"href", "title", "rel", "start"}, attrs
        href = (attrs.get("href") or "").strip().lower()
        assert not href or href.startswith(("http://", "https://", "mailto:")), href


def test_markdown_renders_and_links_get_safe_rel():
    html = str(render_markdown("**bold** and [docs](https://example.com/a) and `code`"))
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html
    assert '<a href="https://example.com/a" rel="noopener noreferrer nofollow">docs</a>' in html
    assert render_markdown("") == "" and render_markdown(None) == ""


def test_code_with_a_language_is_highlighted_and_stays_escaped():
    html = str(render_markdown("```python\ndef f():\n    return '<b>'\n```"))
    assert '<span class="tok-k">def</span>' in html and '<span class="tok-nf">f</span>' in html
    assert "&lt;b&gt;" in html and "<b>" not in html
    plain = str(render_markdown("```\n<b>x</b>\n```\n```no-such-language\n<i>\n```"))
    assert "<span" not in plain and "&lt;b&gt;x&lt;/b&gt;" in plain and "&lt;i&gt;" in plain
    assert "<span" not in str(highlight("x" * (MAX_HIGHLIGHTED + 1), "python"))
    assert str(highlight('{"a": "<img>"}', "json")).count("tok-") >= 4
    assert str(highlight("<img>", "")) == "&lt;img&gt;"


def test_the_text_of_markup_stays_visible():
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in str(
        render_markdown("<script>alert(1)</script>")
    )


# --- charts ---------------------------------------------------------------------------


def test_a_column_chart_scales_bars_to_the_largest_and_says_its_figures():
    svg = str(
        column_chart(
            "d",
            "Cost per day (USD)",
            [("2026-11-01", Decimal("0.5")), ("2026-11-02", Decimal("1"))],
            "USD",
        )
    )
    assert svg.startswith('<svg class="chart"') and 'role="img"' in svg
    assert '<title id="d-t">Cost per day (USD)</title>' in svg
    assert "2026-11-01: 0.5 USD; 2026-11-02: 1 USD" in svg
    heights = [float(h) for h in __import__("re").findall(r'height="([\d.]+)"><title>', svg)]
    assert heights == [pytest.approx(88.0), pytest.approx(176.0)]


def test_chart_labels_are_escaped():
    svg = str(row_chart("m", "<b>models</b>", [("<script>x</script>", Decimal("2"))], "USD"))
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "<b>" not in svg


def test_an_empty_chart_says_so():
    assert "no data" in str(row_chart("e", "Nothing", [], "USD"))
    assert "no data" in str(column_chart("e", "Nothing", [], "USD"))


# --- what pages make of data ------------------------------------------------------------


def _msg(seq, turn, role, content, **kw):
    base = {
        "seq": seq,
        "turn": turn,
        "role": role,
        "content": content,
        "created_at": 100.0 + seq,
        "model": None,
        "provider": None,
        "usage": None,
        "files": None,
        "tool_calls": None,
    }
    return {**base, **kw}


def test_messages_group_into_turns_with_model_cost_files_and_attachments():
    messages = [
        _msg(
            1,
            1,
            "user",
            [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,x"}},
            ],
            files=["/src/a.py"],
        ),
        _msg(
            2,
            1,
            "assistant",
            None,
            model="kimi-k2.6",
            provider="kimi",
            tool_calls=[{"function": {"name": "$web_search"}}],
        ),
        _msg(3, 1, "tool", "results"),
        _msg(4, 1, "assistant", "**done**", model="kimi-k2.6", usage={"prompt_tokens": 5}),
        _msg(5, 2, "user", "again"),
        _msg(6, 2, "assistant", "ok", model="glm-5.1"),
    ]
    turns = group_turns(messages, {1: {"USD": "0.001000000"}})
    assert [(t.turn, t.seq, t.last_seq) for t in turns] == [(1, 1, 4), (2, 5, 6)]
    first = turns[0]
    assert first.model == "kimi-k2.6" and first.cost == ["0.001 USD"] and turns[1].cost == []
    assert first.files == ["/src/a.py"] and first.attachments == ["image (inline)"]
    assert [e.role for e in first.entries] == ["user", "assistant", "tool", "assistant"]
    assert [c.name for c in first.entries[1].calls] == ["$web_search"]
    assert "<strong>done</strong>" in first.entries[3].html
    assert first.usage == {"prompt_tokens": 5}


def _call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_tool_result_is_tied_to_its_call_across_turns_even_when_ids_repeat():
    # Kimi numbers tool calls per response, so an agent session repeats ids.
    messages = [
        _msg(1, 1, "user", "go"),
        _msg(2, 1, "assistant", "", tool_calls=[_call("functions.read:0", "read", '{"p": "a"}')]),
        _msg(3, 2, "tool", "A", tool_call_id="functions.read:0"),
        _msg(4, 2, "assistant", "", tool_calls=[_call("functions.read:0", "read", '{"p": "b"}')]),
        _msg(5, 3, "tool", "B", tool_call_id="functions.read:0"),
        _msg(6, 3, "tool", "?", tool_call_id="never-called"),
        _msg(7, 3, "assistant", "done", reasoning="I read **both**"),
    ]
    turns = group_turns(messages, {})
    first_call = turns[0].entries[1].calls[0]
    result_a, call_b = turns[1].entries
    result_b, orphan, answer = turns[2].entries
    assert result_a.answers is first_call and first_call.result == result_a.anchor == "m3"
    assert result_b.answers is call_b.calls[0] and call_b.calls[0].result == "m5"
    assert str(result_a.output.html) == "A" and result_b.call_id == "functions.read:0"
    assert orphan.answers is None and orphan.call_id == "never-called"
    assert first_call.anchor == "m2-call0" and first_call.summary == "p: a"
    assert "<strong>both</strong>" in answer.reasoning and "done" in answer.html


def test_tool_arguments_show_text_as_text_and_the_rest_as_json_and_long_ones_cut():
    arguments = json.dumps(
        {
            "command": "ls\n<img src=x onerror=alert(1)>",
            "opts": {"n": 1},
            "body": "x" * (MAX_SHOWN + 5),
        }
    )
    messages = [
        _msg(1, 1, "user", "go"),
        _msg(
            2,
            1,
            "assistant",
            "",
            tool_calls=[
                _call("c1", "bash", arguments),
                _call("c2", "odd", "not json <b>"),
                _call("c3", "list", "[1, 2]"),
            ],
        ),
    ]
    bash, odd, listed = group_turns(messages, {})[0].entries[1].calls
    (key, command, code), (_, opts, opts_code), (_, body, _) = bash.members
    assert key == "command" and not code and opts_code
    assert str(command.html) == "ls\n&lt;img src=x onerror=alert(1)&gt;"
    assert '<span class="tok-nt">"n"</span>' in str(opts.html)  # highlighted JSON
    assert body.cut == 5 and len(str(body.html)) == MAX_SHOWN
    assert bash.summary == "command: ls…"
    assert odd.members == [] and str(odd.whole.html) == "not json &lt;b&gt;"
    assert listed.whole is not None and "tok-" in str(listed.whole.html)


def test_an_agents_reminders_are_set_apart_from_its_prompt():
    prompt = "fix it<system-reminder>be <b>brief</b></system-reminder>"
    (entry,) = group_turns([_msg(1, 1, "user", prompt)], {})[0].entries
    assert "fix it" in entry.html and "reminder" not in entry.html
    assert [str(r) for r in entry.reminders] == ["<p>be &lt;b&gt;brief&lt;/b&gt;</p>\n"]


def test_a_system_prompt_is_shown_as_written_not_as_markdown():
    (entry,) = group_turns([_msg(1, 1, "system", "# Environment\n<b>cwd</b>")], {})[0].entries
    assert not entry.html and "<h1>" not in str(entry.output.html)
    assert str(entry.output.html) == "# Environment\n&lt;b&gt;cwd&lt;/b&gt;"


def test_times_read_relative_and_exact():
    now = 1_000_000.0
    assert ago(now - 20, now) == "just now"
    assert ago(now - 180, now) == "3 minutes ago" and ago(now - 3600, now) == "1 hour ago"
    assert ago(now - 3 * 86400, now) == "3 days ago" and ago(now + 14 * 86400, now) == "in 2 weeks"
    assert ago(None, now) == "-"
    assert iso(0) == "1970-01-01T00:00:00Z"


def test_an_agent_session_is_labelled_with_its_client_and_face():
    session = {"face": "anthropic", "client": "Claude Code 2.1.3"}
    assert session_label(session) == "Claude Code 2.1.3 · /v1/messages"
    assert session_label({"face": "responses", "client": None}) == "an agent · /v1/responses"
    assert session_label({"face": None, "client": None}) == ""
    assert total_cost({"USD": "0.000110000", "CNY": "2"}) == ["2.00 CNY", "0.00011 USD"]
    assert client_family("Claude Code 2.1.3") == "Claude Code"
    assert client_family("Codex 0.169.0-alpha+1") == "Codex" and client_family("curl") == "curl"
    assert client_family(None) == ""


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/console/threads/abc", "/console/threads/abc"),
        ("/console/jobs?x=1", "/console/jobs?x=1"),
        ("/console", "/console"),
        ("https://evil.example/console/x", "/console/threads"),
        ("//evil.example/console/x", "/console/threads"),
        ("/\\evil.example", "/console/threads"),
        ("/mcp", "/console/threads"),
        ("/consolex/evil", "/console/threads"),
        ("javascript:alert(1)", "/console/threads"),
        ("/console/\nx", "/console/threads"),
        ("", "/console/threads"),
        (None, "/console/threads"),
    ],
)
def test_a_sign_in_returns_only_to_a_console_page(target, expected):
    assert safe_next(target) == expected


def test_the_job_form_becomes_schedule_arguments():
    args = job_arguments(
        {
            "tool": "chat",
            "arguments": '{"prompt": "hi"}',
            "when": "every 1h",
            "timezone": "",
            "name": "n",
            "continuation_id": "",
            "notify_url": "https://ntfy.sh/t",
            "notify_kind": "ntfy",
        }
    )
    assert args == {
        "tool": "chat",
        "arguments": {"prompt": "hi"},
        "when": "every 1h",
        "timezone": "UTC",
        "name": "n",
        "notify_url": "https://ntfy.sh/t",
        "notify_kind": "ntfy",
    }


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"tool": "chat", "arguments": "{nope", "when": "x"}, "arguments must be a JSON object"),
        ({"tool": "chat", "arguments": "[1]", "when": "x"}, "arguments must be a JSON object"),
        ({"tool": "", "when": "x"}, "tool is required"),
        ({"tool": "chat", "when": ""}, "when is required"),
        ({"tool": "chat", "when": "x" * 201}, "when is longer than 200"),
    ],
)
def test_a_wrong_job_form_says_what_is_wrong(form, message):
    with pytest.raises(FormError, match=message):
        job_arguments(form)


def test_the_memory_form_becomes_remember_arguments():
    assert memory_arguments({"content": " tea ", "type": "", "tags": "a, b,,", "project": ""}) == {
        "content": "tea",
        "type": "fact",
        "tags": ["a", "b"],
    }
    with pytest.raises(FormError, match="content is required"):
        memory_arguments({"content": "  "})


def test_amounts_read_as_people_read_them():
    assert [money(x) for x in ("0.000110000", "5", "4.999475850", Decimal("2.5"), "x")] == [
        "0.00011",
        "5.00",
        "4.99947585",
        "2.50",
        "x",
    ]
