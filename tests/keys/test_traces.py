"""A key's secret is in no span: with every call traced and prompt content on, the
spans of a key's calls on the WebSocket, ``/mcp`` and a model face, exported to an
OTLP collector, name the principal and never carry the secret (nor does the span of
the call that made the key)."""

from __future__ import annotations

import httpx

from exai.client import ExaiClient
from exai.tracing import setup
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.web.faces import TOKENS, base_url
from tests.web.helpers import MODERN, tools_call

ADMIN = {"Authorization": f"Bearer {TOKENS['alice']}"}


async def test_no_span_of_a_keys_calls_carries_its_secret(
    tmp_path, emulator, collector, monkeypatch
):
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    tokens = ",".join(f"{name}={token}" for name, token in TOKENS.items())
    settings = make_settings(
        tmp_path, ws_tokens=tokens, admin_principals=["alice"], trace_content=True,
        otel_exporter_otlp_endpoint=collector.url, otel_traces_sampler="always_on",
        **emulated_providers(emulator),
    )  # fmt: skip
    assert setup.configure(settings)
    try:
        async with running_daemon(settings) as daemon:
            async with httpx.AsyncClient(base_url=base_url(daemon, "")) as http:
                made = await http.post("/admin/keys", headers=ADMIN, json={
                    "principal": "bob", "scopes": "echo,completion"})  # fmt: skip
                assert made.status_code == 201, made.text
                token = made.json()["token"]
                bearer = {"Authorization": f"Bearer {token}"}
                async with ExaiClient(daemon.url, token) as ws:
                    assert (await ws.call("echo", {"text": "over the socket"})).error is None
                mcp = await http.post("/mcp", headers={**MODERN, **bearer},
                                      json=tools_call("echo", text="over mcp"))  # fmt: skip
                assert mcp.status_code == 200, mcp.text
                ask = {"model": "kimi-k2.6", "messages": [{"role": "user", "content": "hi"}]}
                chat = await http.post("/v1/chat/completions", headers=bearer, json=ask)
                assert chat.status_code == 200, chat.text
            assert setup.flush(timeout_s=30)
    finally:
        setup.shutdown()
    secret = token.split("_", 2)[2]
    exported = "\n".join(str(span) for span in collector.spans)
    names = {span.name for span in collector.spans}
    # every face's spans are there (the socket's, /mcp's, the model face's and its
    # model call, with the prompt as content), naming the key's principal
    assert {"call_tool echo", "tools/call echo", "POST /v1/chat/completions",
            "chat kimi-k2.6"} <= names  # fmt: skip
    assert "bob" in exported
    assert secret not in exported and token not in exported
