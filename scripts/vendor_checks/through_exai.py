"""exai's own plugins against the live vendors: one short streamed call each, with
a function tool, through the public :class:`~exai.providers.base.Provider`
interface only (``stream(ChatRequest)``), so it keeps working while the
plugins' insides change. A plugin that raises, or a stream that ends without its
whole response, does not hold.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from exai.errors import ExaiError
from exai.providers import glm, kimi
from exai.providers.base import ChatRequest, Provider

from .kimi import LOOKUP_TOOL, TOOL_PROMPT, ask
from .probe import Outcome, Probe, check, fails, holds

__all__: list[str] = []


async def _stream_with_tools(provider: Provider, model: str, *, tool_stream: bool) -> Outcome:
    request = ChatRequest(
        model=model, messages=ask(TOOL_PROMPT), tools=[LOOKUP_TOOL], max_output_tokens=2048,
        continue_cut=False, client_history=True, tool_stream=tool_stream,
    )  # fmt: skip
    kinds: Counter[str] = Counter()
    response = None
    try:
        async for delta in provider.stream(request):
            kinds[delta.kind] += 1
            if delta.kind == "done":
                response = delta.response
    except ExaiError as exc:
        return fails(f"{type(exc).__name__}: {exc}")
    finally:
        await provider.aclose()
    if response is None:
        return fails(f"the stream ended without its whole response (deltas {dict(kinds)})")
    calls: list[str] = []
    for call in response.tool_calls:
        function: dict[str, Any] = call.get("function") or {}
        try:
            json.loads(function.get("arguments") or "")
        except ValueError:
            return fails(f"{function.get('name')} called with {function.get('arguments')!r}, "
                         "not JSON")  # fmt: skip
        calls.append(f"{function.get('name')}({function.get('arguments')})")
    if not calls and not response.text:
        return fails(f"neither text nor a tool call (finish_reason {response.finish_reason})")
    said = ", ".join(calls) if calls else f"text {response.text[:60]!r}"
    return holds(f"{said}; finish_reason {response.finish_reason}, deltas {dict(kinds)}, "
                 f"usage {response.usage.as_dict()}")  # fmt: skip


@check("exai.kimi_stream_tools", vendor="kimi", models=("kimi-k2.6",), section="exai",
       rule="exai's Kimi plugin (exai.providers.kimi.create) streams a call offering a "
            "function tool from the live vendor to a whole response",
       source="src/providers/kimi.py through Provider.stream (src/providers/base.py)")  # fmt: skip
async def kimi_stream_tools(probe: Probe) -> Outcome:
    return await _stream_with_tools(kimi.create(probe.settings), probe.model, tool_stream=False)


@check("exai.glm_stream_tools", vendor="glm", models=("glm-5.1",), section="exai",
       rule="exai's GLM plugin (exai.providers.glm.create) streams a call offering a "
            "function tool, with tool_stream, from the live vendor to a whole response",
       source="src/providers/glm.py through Provider.stream (src/providers/base.py)")  # fmt: skip
async def glm_stream_tools(probe: Probe) -> Outcome:
    return await _stream_with_tools(glm.create(probe.settings), probe.model, tool_stream=True)
