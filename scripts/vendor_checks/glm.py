"""Z.ai's documented rules, checked against its chat-completions endpoint.

As for Moonshot (:mod:`.kimi`): small prompts, capped replies; the web search
check costs one search request. The last check reads the ``finish_reason`` of
every GLM answer the run saw, so it runs after the others.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from exai.providers.wire import StreamAssembler

from .kimi import LOOKUP_TOOL, TOOL_PROMPT, TOOL_RESULT, ask
from .probe import (
    Exchange,
    Outcome,
    Probe,
    Skip,
    carries_reasoning,
    check,
    fails,
    holds,
    observed,
)

__all__ = ["GLM_MODELS", "tool_stream_shape"]

GLM_MODELS = ("glm-5.3", "glm-5.2", "glm-5.1")
THINKING_PAGE = "docs.z.ai/guides/capabilities/thinking-mode"
CHAT_PAGE = "docs.z.ai/api-reference/llm/chat-completion"
# What Z.ai says a finish_reason may be: its chat page and code page, and the
# overflow reason a third party saw (VENDORS.md row 25).
DOCUMENTED_FINISH = frozenset({"stop", "length", "tool_calls", "sensitive", "network_error",
                               "model_context_window_exceeded"})  # fmt: skip


def _body(messages: list[dict[str, Any]], cap: int, **extra: Any) -> dict[str, Any]:
    return {"messages": messages, "max_tokens": cap, **extra}


@check("glm.reasoning_content", vendor="glm", models=GLM_MODELS,
       rule="GLM-5.x thinks by default and returns message.reasoning_content",
       source=f"VENDORS.md rows 14, 21; {THINKING_PAGE}; "
              "docs.bigmodel.cn/cn/guide/capabilities/thinking-mode")  # fmt: skip
async def reasoning_content(probe: Probe) -> Outcome:
    return await carries_reasoning(probe, _body(ask("Reply with the single word: ok"), 1024))


@check("glm.reasoning_effort", vendor="glm", models=("glm-5.2",),
       rule='GLM-5.2 and later take reasoning_effort; "low" is accepted',
       source="VENDORS.md row 20; zai-sdk 0.2.3 chat.completions.create docstring "
              "('Effective for glm-5.2 and above')")  # fmt: skip
async def reasoning_effort(probe: Probe) -> Outcome:
    answer = await probe.chat(_body(ask("Reply with: ok"), 512, reasoning_effort="low"))
    if answer.ok:
        return holds(f"accepted (finish_reason {answer.finish_reason()})")
    return fails(answer.said())


@check("glm.thinking_disabled", vendor="glm", models=("glm-5.3",),
       rule='GLM-5.3 "cannot disable thinking" (third parties): what thinking '
            '{"type": "disabled"} gets is recorded',
       source="VENDORS.md section 0 and E9 (3p openrouter.ai/~z-ai/glm-latest)")  # fmt: skip
async def thinking_disabled(probe: Probe) -> Outcome:
    answer = await probe.chat(_body(ask("Reply with: ok"), 256, thinking={"type": "disabled"}))
    if not answer.ok:
        return observed(f"refused: {answer.said()}")
    reasoning = answer.message.get("reasoning_content") or ""
    if reasoning:
        return observed(f"accepted, and it reasoned anyway ({len(reasoning)} characters)")
    return observed("accepted, and it answered without reasoning")


def tool_stream_shape(chunks: list[Any]) -> dict[str, Any]:
    """How a streamed tool call arrived, piece by piece: is the first argument
    fragment bundled with the name, are the id and ``function.name`` repeated on
    later pieces, does the finish chunk carry a fragment. Empty: no call."""
    pieces: list[tuple[bool, dict[str, Any]]] = []
    for chunk in chunks:
        for choice in (chunk.get("choices") or []) if isinstance(chunk, dict) else []:
            finish = bool(choice.get("finish_reason"))
            for piece in (choice.get("delta") or {}).get("tool_calls") or []:
                pieces.append((finish, piece))
    if not pieces:
        return {}
    first_index = pieces[0][1].get("index", 0)
    call = [(finish, piece) for finish, piece in pieces if piece.get("index", 0) == first_index]

    def function(piece: dict[str, Any]) -> dict[str, Any]:
        return piece.get("function") or {}

    def arguments(piece: dict[str, Any]) -> str:
        value = function(piece).get("arguments") or ""
        return value if isinstance(value, str) else json.dumps(value)

    first = call[0][1]
    return {
        "pieces": len(call),
        "first_piece_has_arguments": bool(arguments(first)),
        "id_repeated": sum(1 for _, p in call if p.get("id")) > 1,
        "name_repeated": sum(1 for _, p in call if function(p).get("name")) > 1,
        "arguments_on_finish_chunk": any(finish and arguments(p) for finish, p in call),
        "name": function(first).get("name"),
        "id": first.get("id"),
        "arguments": "".join(arguments(p) for _, p in call),
    }


async def _streamed_call(probe: Probe) -> Exchange:
    """The model's call to lookup_word, streamed with tool_stream (once per model)."""

    async def make() -> Exchange:
        body = _body(ask(TOOL_PROMPT), 2048, tools=[LOOKUP_TOOL], tool_stream=True)
        return await probe.chat(body, stream=True)

    return await probe.once(("glm.tool_stream", probe.model), make)


@check("glm.tool_stream", vendor="glm", models=GLM_MODELS,
       rule="with stream and tool_stream, a tool call's arguments stream in pieces that join "
            "into the call's JSON; the chunk shape is recorded (first fragment bundled with "
            "the name? id repeated? function.name repeated?)",
       source="VENDORS.md rows 15, 24; docs.z.ai/guides/tools/stream-tool; 3p "
              "braintrustdata/lingua#318, vllm#44098")  # fmt: skip
async def tool_stream(probe: Probe) -> Outcome:
    answer = await _streamed_call(probe)
    if not answer.ok:
        return fails(answer.said())
    shape = tool_stream_shape(answer.chunks)
    if not shape:
        raise Skip(f"the model answered without calling lookup_word "
                   f"(finish_reason {answer.finish_reason()})")  # fmt: skip
    assembler = StreamAssembler()
    for chunk in answer.json_chunks():
        assembler.feed(chunk)
    calls = assembler.result().tool_calls
    exai_name = calls[0]["function"]["name"] if calls else None
    flags = ", ".join(f"{k} {shape[k]}" for k in ("pieces", "first_piece_has_arguments",
                      "id_repeated", "name_repeated", "arguments_on_finish_chunk"))  # fmt: skip
    note = "" if exai_name == shape["name"] else f"; exai's StreamAssembler reads the name " \
                                                  f"as {exai_name!r}"  # fmt: skip
    try:
        json.loads(shape["arguments"])
    except ValueError:
        return fails(f"the pieces join into {shape['arguments']!r}, not JSON ({flags}){note}")
    return holds(f"{shape['name']}({shape['arguments']}); {flags}{note}")


@check("glm.tool_round", vendor="glm", models=GLM_MODELS,
       rule="the tool result sent back with the call's reasoning_content (as Z.ai asks) is "
            "answered",
       source="VENDORS.md row 27; docs.bigmodel.cn/cn/guide/capabilities/thinking-mode "
              "('必须显式保留 Reasoning content')")  # fmt: skip
async def tool_round(probe: Probe) -> Outcome:
    first = await _streamed_call(probe)
    shape = tool_stream_shape(first.chunks) if first.ok else {}
    if not shape:
        raise Skip("no streamed call to answer (see glm.tool_stream)")
    call = {"id": shape["id"], "type": "function",
            "function": {"name": shape["name"], "arguments": shape["arguments"]}}  # fmt: skip
    assistant = {"role": "assistant", "content": first.streamed_text("content"),
                 "reasoning_content": first.streamed_text("reasoning_content"),
                 "tool_calls": [call]}  # fmt: skip
    result = {"role": "tool", "tool_call_id": shape["id"], "content": TOOL_RESULT}
    second = await probe.chat(
        _body([*ask(TOOL_PROMPT), assistant, result], 2048, tools=[LOOKUP_TOOL])
    )
    if not second.ok:
        return fails(f"the result was refused: {second.said()}")
    text = str(second.message.get("content") or "")
    return holds(f"answered {text[:60]!r} (finish_reason {second.finish_reason()})")


@check("glm.web_search", vendor="glm", models=("glm-5.1",),
       rule="the web_search tool's results come back at the top level of the answer, "
            "as `web_search`",
       source=f"VENDORS.md row 19; {CHAT_PAGE}")  # fmt: skip
async def web_search(probe: Probe) -> Outcome:
    tool = {"type": "web_search", "web_search": {"enable": True, "search_result": True}}
    answer = await probe.chat(
        _body(ask("What is the capital of France? One word."), 1024, tools=[tool])
    )
    if not answer.ok:
        return fails(answer.said())
    results = answer.data.get("web_search")
    if isinstance(results, list) and results:
        fields = sorted({k for r in results if isinstance(r, dict) for k in r})
        return holds(f"{len(results)} results with {', '.join(fields)}")
    return fails("no top-level web_search in the answer")


@check("glm.temperature_raw", vendor="glm", models=("glm-5.1",),
       rule="temperature takes [0, 1]: 1.0 sent as given (not the SDK's 0.99) is accepted",
       source=f"VENDORS.md row 18; {CHAT_PAGE}")  # fmt: skip
async def temperature_raw(probe: Probe) -> Outcome:
    answer = await probe.chat(
        _body(ask("Reply with: ok"), 16, temperature=1.0, thinking={"type": "disabled"})
    )
    return holds("accepted") if answer.ok else fails(answer.said())


@check("glm.embedding_dimensions", vendor="glm", models=("embedding-3",),
       rule="embedding-3 takes dimensions 256, 512, 1024 or 2048: 300 is refused",
       source="VENDORS.md row 46, E16 (3p zai-rs, rubydoc smart_prompt)")  # fmt: skip
async def embedding_dimensions(probe: Probe) -> Outcome:
    answer = await probe.post(
        "/embeddings", {"model": probe.model, "input": "hello", "dimensions": 300}
    )
    if 400 <= answer.status < 500:
        return holds(answer.said())
    if answer.ok:
        data = answer.data.get("data") or [{}]
        size = len(data[0].get("embedding") or []) if isinstance(data[0], dict) else "?"
        return fails(f"accepted: a vector of {size} dimensions")
    return fails(answer.said())


@check("glm.finish_reasons", vendor="glm", models=("glm-*",),
       rule="every finish_reason Z.ai sent in this run is one it documents (stop, length, "
            "tool_calls, sensitive, network_error, model_context_window_exceeded)",
       source="VENDORS.md row 25; docs.z.ai/api-reference/api-code; "
              "3p anomalyco/opencode#18813")  # fmt: skip
async def finish_reasons(probe: Probe) -> Outcome:
    seen = Counter(reason for _, reason in probe.run.finish_reasons["glm"])
    if not seen:
        raise Skip("no GLM answer was read before this check")
    listed = ", ".join(f"{reason} x{n}" for reason, n in seen.most_common())
    unknown = sorted(set(seen) - DOCUMENTED_FINISH)
    if unknown:
        return fails(f"undocumented {', '.join(unknown)}; seen {listed}")
    return holds(f"seen {listed}")
