"""A ``traceparent`` sent on each face becomes the parent of exai's spans: /mcp
(MCP's ``_meta``, and the HTTP header), /v1 (the HTTP header, through the real
``openai`` SDK), the stdio shim's forwarding, and a job run, which starts a
trace of its own."""

from __future__ import annotations

import json
import os

import httpx
from openai import AsyncOpenAI
from opentelemetry.trace import SpanKind, StatusCode

from exai.shim.server import _trace_of
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.jobs.helpers import FAST, finished_runs
from tests.tracing.test_call_spans import PARENT_SPAN, PARENT_TRACE, TRACEPARENT
from tests.web.helpers import MODERN, TOKEN, mcp_daemon, mcp_url, tools_call

OTHER = "0af7651916cd43dd8448eb211c80319c"
OTHER_PARENT = f"00-{OTHER}-b7ad6b7169203331-01"


def _is_child_of_the_callers(sp) -> bool:
    return (f"{sp.context.trace_id:032x}" == PARENT_TRACE
            and f"{sp.parent.span_id:016x}" == PARENT_SPAN)  # fmt: skip


async def test_mcp_meta_traceparent_is_the_parent_and_wins_over_the_header(tmp_path, spans):
    body = tools_call(text="traced")
    body["params"]["_meta"]["traceparent"] = TRACEPARENT
    headers = {**MODERN, "Authorization": f"Bearer {TOKEN}", "traceparent": OTHER_PARENT}
    async with mcp_daemon(tmp_path) as daemon, httpx.AsyncClient() as http:
        answer = await http.post(mcp_url(daemon), json=body, headers=headers)
        structured = answer.json()["result"]["structuredContent"]
    face = spans.one("tools/call echo")
    assert face.kind is SpanKind.SERVER and _is_child_of_the_callers(face)
    assert face.attributes["exai.face"] == "mcp-http"
    assert face.attributes["mcp.method.name"] == "tools/call"
    assert face.attributes["gen_ai.tool.name"] == "echo"
    call = spans.one("execute_tool echo")
    assert call.parent.span_id == face.context.span_id
    assert structured["trace_id"] == PARENT_TRACE  # metadata is flattened there


async def test_mcp_http_header_is_the_parent_without_meta(tmp_path, spans):
    headers = {**MODERN, "Authorization": f"Bearer {TOKEN}", "traceparent": TRACEPARENT}
    async with mcp_daemon(tmp_path) as daemon, httpx.AsyncClient() as http:
        await http.post(mcp_url(daemon), json=tools_call(name="nope"),
                        headers={**headers, "Mcp-Name": "nope"})  # fmt: skip
    face = spans.one("tools/call nope")
    assert _is_child_of_the_callers(face)
    assert face.status.status_code is StatusCode.ERROR
    assert face.attributes["error.type"] == "tool_error"  # MCP's convention
    assert face.attributes["exai.error.code"] == "TOOL_NOT_FOUND"


def test_the_stdio_shim_passes_the_clients_context_on_normalized():
    assert _trace_of({"traceparent": TRACEPARENT, "tracestate": "a=1"}) == {
        "traceparent": TRACEPARENT, "tracestate": "a=1"}  # fmt: skip
    assert _trace_of({"traceparent": "garbage"}) == {}
    assert _trace_of({"traceparent": TRACEPARENT, "tracestate": "x" * 600}) == {
        "traceparent": TRACEPARENT}  # fmt: skip
    assert _trace_of(None) == {}


async def test_openai_face_takes_the_traceparent_header(tmp_path, spans, provider_emulator):
    provider_emulator.reset()
    settings = make_settings(tmp_path, ws_token=TOKEN, **emulated_providers(provider_emulator))
    async with running_daemon(settings) as daemon:
        base = f"http://127.0.0.1:{daemon.web.port}/v1"
        async with AsyncOpenAI(base_url=base, api_key=TOKEN, max_retries=0) as sdk:
            done = await sdk.chat.completions.create(
                model="kimi-k2.6", messages=[{"role": "user", "content": "hi"}],
                extra_headers={"traceparent": TRACEPARENT},
            )  # fmt: skip
    assert done.choices[0].message.content
    assert done.model_extra["exai"]["trace_id"] == PARENT_TRACE
    face = spans.one("POST /v1/chat/completions")
    assert face.kind is SpanKind.SERVER and _is_child_of_the_callers(face)
    assert face.attributes["gen_ai.request.model"] == "kimi-k2.6"
    tool = spans.one("execute_tool completion")
    assert tool.parent.span_id == face.context.span_id
    model = spans.one("chat kimi-k2.6")
    assert f"{model.context.trace_id:032x}" == PARENT_TRACE


async def test_a_job_run_is_a_trace_of_its_own_tied_to_its_job(tmp_path, spans, client_factory):
    settings = make_settings(tmp_path, **FAST)
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        res = await client.call("schedule", {"tool": "echo", "arguments": {"text": "wake up"},
                                             "when": "every 0.3", "name": "waker"},
                                trace={"traceparent": TRACEPARENT})  # fmt: skip
        job = json.loads(res.outputs[0].text)
        await finished_runs(daemon.services.jobs.store, job["id"], 1)
        await client.call("unschedule", {"id": job["id"]})
    runs = spans.named("job echo")
    assert runs
    run = runs[0]
    assert run.parent is None and run.kind is SpanKind.SERVER
    assert f"{run.context.trace_id:032x}" != PARENT_TRACE  # not the scheduling call's trace
    (link,) = run.links  # but linked to the call that made the job
    scheduling = spans.one("execute_tool schedule")
    assert f"{link.context.trace_id:032x}" == PARENT_TRACE
    assert link.context.span_id == scheduling.context.span_id
    assert run.attributes["exai.job.id"] == job["id"]
    assert run.attributes["exai.job.attempt"] == 1
    call = [s for s in spans.children(run) if s.name == "execute_tool echo"]
    assert call and call[0].attributes["exai.session.id"].startswith("job-")


async def test_the_stdio_shim_passes_the_clients_context_to_the_daemon(tmp_path, spans):
    """The official MCP client, launching a real ``exai shim`` (not tracing itself),
    sends a ``traceparent`` in ``_meta``; the daemon's span is its child."""
    from tests.shim.helpers import mcp_session

    async with running_daemon(make_settings(tmp_path)) as daemon:
        env = {**os.environ, "EXAI_LOG_LEVEL": "warning", "EXAI_WS_TOKEN": "",
               "OTEL_EXPORTER_OTLP_ENDPOINT": ""}  # fmt: skip
        async with mcp_session(env, tmp_path, args=["--url", daemon.url]) as session:
            result = await session.call_tool("echo", {"text": "via the shim"},
                                             meta={"traceparent": TRACEPARENT})  # fmt: skip
    assert not result.is_error
    face = spans.one("call_tool echo")
    assert _is_child_of_the_callers(face)
    assert result.structured_content["trace_id"] == PARENT_TRACE
