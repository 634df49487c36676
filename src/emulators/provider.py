"""The provider emulator: a local stand-in for Moonshot (Kimi) and Z.ai (GLM).

A TEST FIXTURE, also used by the benchmarks and ``make baseline``; never part of
the daemon. One HTTP server on 127.0.0.1 speaks both vendors' chat-completions
wire formats (``/v1/chat/completions`` and ``/v1/models`` like Moonshot, which
any OpenAI-compatible client can use too, and ``/api/paas/v4/chat/completions``
like Z.ai), whole or as SSE streams, with the vendors' real error bodies, and
both embeddings endpoints (``/v1/embeddings``, ``/api/paas/v4/embeddings``) with
the deterministic vectors of :mod:`exai.emulators.embeddings`.

Behaviour is scripted from tests, in order of precedence:

- a queue of scripted responses (``POST /_emulator/script`` or
  :meth:`EmulatorServer.script`), each consumed by one request, e.g.
  ``[{"status": 429, "retry_after_ms": 200}, {"status": 200}]``, or calls to the
  caller's tools, ``{"tool_calls": [{"name": "read", "arguments": {"path": "a"}}],
  "when": {"offers_tool": "read"}}`` (see :mod:`exai.emulators.state`);
- a marker in the last user message, ``[emulate:status=503,latency_ms=50]``, for
  callers that can only send prompts (benchmarks through the daemon);
- the configuration (``POST /_emulator/config``): default latency, a delay
  between stream chunks, a prompt-token limit that triggers the vendor's
  context-length answer (Moonshot: HTTP 400; Z.ai: a 200 with
  ``finish_reason: "model_context_window_exceeded"``), an API key that every
  request must carry, the vendors' automatic prompt caches (on by default; see
  :mod:`exai.emulators.prompt_cache`), which report cached prompt tokens in
  each vendor's usage field, and ``glm_tool_stream_repeat_name`` (Z.ai
  ``tool_stream`` pieces repeat the function name).

Z.ai's abnormal ends are scripted as finish reasons: ``{"finish_reason":
"network_error"}`` or ``"sensitive"`` (or the marker
``[emulate:finish_reason=network_error]``); scripting ``{"status": 400,
"error": "context_length"}`` for Z.ai gives its overflow reply, a 200 (see
:mod:`exai.emulators.replies`).

Moonshot's files API is emulated too (:mod:`exai.emulators.files`): uploads
for ``file-extract``, counted in :attr:`EmulatorServer.uploads`, and the text
"extracted" from them by a fixed rule.

What the vendors refuse (retired ids, deprecated or unsupported fields, locked
sampling, a thinking request without its reasoning, untyped tool schemas, tool
choices and stop lists they do not take, a tool result answering no call) is in
:mod:`exai.emulators.vendor_rules`, what each model does in
:mod:`exai.emulators.models`, and every rule with its source in
:data:`exai.emulators.contract.RULES`.

Every request is recorded (``GET /_emulator/requests``, :attr:`EmulatorServer.requests`)
with its body, headers, the images it carried (``images``) and the times it
arrived and was answered, so tests can assert what was sent and whether
requests overlapped. What the emulated model replies is described in
:mod:`exai.emulators.replies`.

Run by hand: ``python -m exai.emulators.provider --port 8090 --latency-ms 500``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from exai.emulators.embeddings import embeddings_body
from exai.emulators.files import file_routes, image_parts
from exai.emulators.prompt_cache import MOONSHOT_MIN_CACHED_PROMPT
from exai.emulators.replies import compose_reply, overflow_reply, prompt_tokens
from exai.emulators.serving import ServedApp, serve_in_thread
from exai.emulators.state import EmulatorConfig, EmulatorState, Scripted, marker
from exai.emulators.vendor_rules import refusal
from exai.emulators.vendor_wire import (
    Reply,
    Vendor,
    completion_body,
    default_error_kind,
    error_body,
    sse,
    stream_chunks,
)

__all__ = ["EmulatorConfig", "EmulatorServer", "EmulatorState", "Scripted", "build_app", "main"]

KIMI_PREFIX = "/v1"
GLM_PREFIX = "/api/paas/v4"


def build_app(state: EmulatorState) -> Starlette:
    async def chat(request: Request, vendor: Vendor) -> Response:
        received = time.time()
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": {"message": "body is not JSON"}}, status_code=400)
        entry = state.record({
            "vendor": vendor, "path": request.url.path, "headers": dict(request.headers),
            "body": body, "received_at": received, "answered_at": None,
            "images": image_parts(list(body.get("messages") or [])),
        })  # fmt: skip
        try:
            plan = state.next_scripted(vendor, body) or marker(body) or Scripted()
        except ValueError as exc:
            return JSONResponse({"error": {"message": str(exc)}}, status_code=400)
        config = state.config
        latency = config.latency_ms if plan.latency_ms is None else plan.latency_ms
        if latency > 0:
            await asyncio.sleep(latency / 1000.0)
        entry["answered_at"] = time.time()

        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        kind, detail = None, ""
        refused = refusal(vendor, body)
        if config.api_key is not None and token != config.api_key:
            kind = "auth"
        elif plan.status >= 400:
            kind = plan.error or default_error_kind(plan.status, vendor)
        elif refused is not None:
            kind, detail = refused
        elif config.max_prompt_tokens is not None:
            if prompt_tokens(body.get("messages") or []) > config.max_prompt_tokens:
                kind = "context_length"
        model = str(body.get("model", ""))
        if kind == "context_length" and vendor == "glm" and plan.body is None:
            return _answer(vendor, entry["seq"], model, body, overflow_reply(body), plan, config)
        if kind is not None:
            status, payload = error_body(vendor, kind, limit=config.max_prompt_tokens or 8192,
                                         detail=detail)  # fmt: skip
            if plan.status >= 400:
                status = plan.status
            headers = {}
            if plan.retry_after is not None:
                headers["Retry-After"] = f"{plan.retry_after:g}"
            if plan.retry_after_ms is not None:
                headers["retry-after-ms"] = str(plan.retry_after_ms)
            return JSONResponse(plan.body or payload, status_code=status, headers=headers)

        reply = compose_reply(
            vendor, body, entry["seq"], text=plan.text, reasoning=plan.reasoning,
            finish_reason=plan.finish_reason, tool_calls=plan.tool_calls,
        )  # fmt: skip
        if config.prompt_cache:
            key = (vendor, model, token)
            floor = MOONSHOT_MIN_CACHED_PROMPT if vendor == "kimi" else 0
            reply.cached_tokens = state.prompt_cache.observe(
                key, body.get("messages") or [], longer_than=floor
            )
        return _answer(vendor, entry["seq"], model, body, reply, plan, config)

    async def embeddings(request: Request, vendor: Vendor) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": {"message": "body is not JSON"}}, status_code=400)
        state.record({
            "vendor": vendor, "path": request.url.path, "headers": dict(request.headers),
            "body": body, "received_at": time.time(), "answered_at": time.time(),
        })  # fmt: skip
        config = state.config
        if config.embeddings_status >= 400:
            kind = default_error_kind(config.embeddings_status, vendor)
            _, payload = error_body(vendor, kind)
            headers = {}
            if config.embeddings_retry_after is not None:
                headers["Retry-After"] = f"{config.embeddings_retry_after:g}"
            return JSONResponse(payload, status_code=config.embeddings_status, headers=headers)
        status, reply = embeddings_body(body, vendor)
        return JSONResponse(reply, status_code=status)

    async def kimi_embeddings(request: Request) -> Response:
        return await embeddings(request, "kimi")

    async def glm_embeddings(request: Request) -> Response:
        return await embeddings(request, "glm")

    async def kimi_chat(request: Request) -> Response:
        return await chat(request, "kimi")

    async def glm_chat(request: Request) -> Response:
        return await chat(request, "glm")

    async def models(request: Request) -> Response:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "emulator"}
                for m in state.config.models]  # fmt: skip
        return JSONResponse({"object": "list", "data": data})

    def authorized(request: Request) -> Response | None:
        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if state.config.api_key is None or token == state.config.api_key:
            return None
        status, payload = error_body("kimi", "auth")
        return JSONResponse(payload, status_code=status)

    async def control_script(request: Request) -> Response:
        raw = await request.json()
        items = raw.get("responses", raw) if isinstance(raw, dict) else raw
        try:
            state.script(items)
        except (TypeError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"ok": True})

    async def control_config(request: Request) -> Response:
        try:
            state.config.update(await request.json())
        except (TypeError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(asdict(state.config))

    async def control_requests(request: Request) -> Response:
        return JSONResponse(state.requests())

    async def control_reset(request: Request) -> Response:
        state.reset()
        return JSONResponse({"ok": True})

    return Starlette(routes=[
        Route(f"{KIMI_PREFIX}/chat/completions", kimi_chat, methods=["POST"]),
        Route(f"{KIMI_PREFIX}/models", models, methods=["GET"]),
        Route(f"{GLM_PREFIX}/chat/completions", glm_chat, methods=["POST"]),
        *file_routes(state.files, KIMI_PREFIX, authorized),
        Route(f"{KIMI_PREFIX}/embeddings", kimi_embeddings, methods=["POST"]),
        Route(f"{GLM_PREFIX}/embeddings", glm_embeddings, methods=["POST"]),
        Route("/_emulator/script", control_script, methods=["POST"]),
        Route("/_emulator/config", control_config, methods=["POST"]),
        Route("/_emulator/requests", control_requests, methods=["GET"]),
        Route("/_emulator/reset", control_reset, methods=["POST"]),
    ])  # fmt: skip


def _answer(
    vendor: Vendor,
    seq: int,
    model: str,
    body: dict[str, Any],
    reply: Reply,
    plan: Scripted,
    config: EmulatorConfig,
) -> Response:
    """The reply, whole or as an SSE stream."""
    if not body.get("stream"):
        return JSONResponse(completion_body(vendor, seq, model, reply))
    chunks = stream_chunks(
        vendor, seq, model, reply, tool_stream=body.get("tool_stream") is True,
        repeat_name=config.glm_tool_stream_repeat_name,
    )  # fmt: skip
    return StreamingResponse(
        _sse(chunks, config.chunk_delay_ms, plan.fail_after_chunks),
        media_type="text/event-stream",
    )


async def _sse(
    chunks: list[dict[str, Any]], delay_ms: float, fail_after: int | None
) -> AsyncIterator[str]:
    for index, chunk in enumerate(chunks):
        if fail_after is not None and index >= fail_after:
            yield sse({"error": {"message": "emulated failure mid-stream", "type": "server_error",
                                 "code": "500"}})  # fmt: skip
            return
        yield sse(chunk)
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000.0)
    yield sse("[DONE]")


class EmulatorServer:
    """The emulator on an ephemeral loopback port, served by a background thread
    with its own event loop (so it keeps answering while a test blocks)."""

    def __init__(self, *, latency_ms: float = 0.0, port: int = 0) -> None:
        self.state = EmulatorState(EmulatorConfig(latency_ms=latency_ms))
        self._port = port
        self._served: ServedApp | None = None
        self.port = 0

    def start(self) -> EmulatorServer:
        self._served = serve_in_thread(
            build_app(self.state), "exai-provider-emulator", port=self._port,
            backlog=4096, timeout_keep_alive=30,
        )  # fmt: skip
        self.port = self._served.port
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url_kimi(self) -> str:
        return self.base_url + KIMI_PREFIX

    @property
    def base_url_glm(self) -> str:
        return self.base_url + GLM_PREFIX

    @property
    def base_url_openai(self) -> str:
        return self.base_url_kimi

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.state.requests()

    @property
    def uploads(self) -> list[dict[str, Any]]:
        """Every file uploaded to the emulated files API, oldest first."""
        return self.state.files.uploads

    def requests_for(self, vendor: Vendor) -> list[dict[str, Any]]:
        return [r for r in self.state.requests() if r["vendor"] == vendor]

    def script(self, *responses: Scripted | dict[str, Any], vendor: Vendor | None = None) -> None:
        """Queue responses; with ``vendor``, only that vendor's requests take them."""
        items = [Scripted.parse(r) if isinstance(r, dict) else r for r in responses]
        for item in items:
            item.vendor = item.vendor or vendor
        self.state.script(items)

    def configure(self, **values: Any) -> None:
        self.state.config.update(values)

    def reset(self) -> None:
        self.state.reset()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Emulate the Kimi and GLM APIs locally.")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    state = EmulatorState(EmulatorConfig(latency_ms=args.latency_ms))
    base = f"http://127.0.0.1:{args.port}"
    print(f"KIMI_BASE_URL={base}{KIMI_PREFIX}\nGLM_BASE_URL={base}{GLM_PREFIX}", flush=True)
    uvicorn.run(build_app(state), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
