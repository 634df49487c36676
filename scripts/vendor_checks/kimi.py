"""Moonshot's documented rules, checked against its chat-completions endpoint.

Every request is small: a one-line prompt, a cap on the reply, thinking switched
off where the rule does not need it. A request the rule expects to be refused
costs nothing when it is; the cap bounds what it costs when it is not. Sources
are the rows of VENDORS.md (the vendors as documented, rule by rule) and the
pages they cite.
"""

from __future__ import annotations

import json
from typing import Any

from exai.providers.error_mapping import status_error

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

__all__ = ["KIMI_MODELS", "LOOKUP_TOOL", "TOOL_PROMPT", "TOOL_RESULT", "ask"]

KIMI_MODELS = ("kimi-k3", "kimi-k2.7-code", "kimi-k2.6")
SWITCHABLE = "kimi-k2.6"  # the one whose thinking can be turned off
K26_WINDOW = 262_144  # kimi-k2.6's context window (VENDORS.md row 31)

THINKING_GUIDE = "platform.kimi.ai/docs/guide/use-kimi-k2-thinking-model"
CHAT_REFERENCE = "test-platform.kimi.ai/docs/api/chat"
ERRORS_PAGE = "platform.kimi.ai/docs/api/errors"

LOOKUP_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "lookup_word",
        "description": "Look up the meaning of an English word in the dictionary.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string", "description": "The word to look up"}},
            "required": ["word"],
        },
    },
}
TOOL_PROMPT = "Use the lookup_word tool to look up the word 'apple'. Do not answer from memory."
TOOL_RESULT = "apple: the round fruit of a tree of the rose family."
OFF = {"thinking": {"type": "disabled"}}


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _body(messages: list[dict[str, Any]], cap: int, **extra: Any) -> dict[str, Any]:
    """A request capped with ``max_completion_tokens``, the field Moonshot documents."""
    return {"messages": messages, "max_completion_tokens": cap, **extra}


def _refused(answer: Exchange) -> bool:
    return 400 <= answer.status < 500


def _refusal(answer: Exchange, what: str) -> Outcome:
    """Holds when the vendor refused; the refusal's words are the detail."""
    if _refused(answer):
        return holds(answer.said())
    if answer.ok:
        return fails(f"accepted {what} (finish_reason {answer.finish_reason()})")
    return fails(f"not a refusal but {answer.said()}")


@check("kimi.reasoning_content", vendor="kimi", models=KIMI_MODELS,
       rule="a thinking model's answer carries its reasoning in message.reasoning_content",
       source=f"VENDORS.md rows 3, 21; {THINKING_GUIDE}")  # fmt: skip
async def reasoning_content(probe: Probe) -> Outcome:
    return await carries_reasoning(probe, _body(ask("Reply with the single word: ok"), 1024))


@check("kimi.k3_refuses_thinking", vendor="kimi", models=("kimi-k3",),
       rule="kimi-k3 always reasons and refuses the `thinking` parameter",
       source="VENDORS.md section 0, row 3; 3p tables citing "
              "platform.moonshot.cn/docs/guide/kimi-k3-quickstart")  # fmt: skip
async def k3_refuses_thinking(probe: Probe) -> Outcome:
    answer = await probe.chat(_body(ask("Reply with: ok"), 16, thinking={"type": "enabled"}))
    return _refusal(answer, "thinking: enabled")


@check("kimi.k3_reasoning_effort", vendor="kimi", models=("kimi-k3",),
       rule="kimi-k3 takes reasoning_effort (low, high, max); low is accepted",
       source="VENDORS.md section 0, row 20; 3p tables citing "
              "platform.moonshot.cn/docs/guide/kimi-k3-quickstart")  # fmt: skip
async def k3_reasoning_effort(probe: Probe) -> Outcome:
    answer = await probe.chat(_body(ask("Reply with: ok"), 512, reasoning_effort="low"))
    if answer.ok:
        usage = answer.data.get("usage") or {}
        return holds(f"accepted; completion_tokens {usage.get('completion_tokens')}")
    return fails(answer.said())


@check("kimi.k27_code_refuses_disabled", vendor="kimi", models=("kimi-k2.7-code",),
       rule='kimi-k2.7-code always thinks: thinking {"type": "disabled"} is an error',
       source=f"VENDORS.md section 0, row 3; {THINKING_GUIDE} (K2.7 table)")  # fmt: skip
async def k27_code_refuses_disabled(probe: Probe) -> Outcome:
    answer = await probe.chat(_body(ask("Reply with: ok"), 16, **OFF))
    return _refusal(answer, "thinking: disabled")


async def _tool_call(probe: Probe) -> tuple[Exchange, dict[str, Any]]:
    """The model's call to lookup_word, or Skip when it answered without calling."""
    first = await probe.chat(_body(ask(TOOL_PROMPT), 2048, tools=[LOOKUP_TOOL]))
    if not first.ok:
        raise Skip(f"the first request was refused: {first.said()}")
    calls = first.message.get("tool_calls") or []
    if not calls:
        raise Skip(f"the model answered without calling lookup_word "
                   f"(finish_reason {first.finish_reason()})")  # fmt: skip
    return first, calls[0]


@check("kimi.tool_round", vendor="kimi", models=KIMI_MODELS,
       rule="a tool round works: the model calls a function tool, and the result sent back "
            "with the call's reasoning_content is answered",
       source=f"VENDORS.md row 26; {THINKING_GUIDE}")  # fmt: skip
async def tool_round(probe: Probe) -> Outcome:
    first, call = await _tool_call(probe)
    assistant = {"role": "assistant", "content": first.message.get("content") or "",
                 "reasoning_content": first.message.get("reasoning_content") or "",
                 "tool_calls": [call]}  # fmt: skip
    result = {"role": "tool", "tool_call_id": call.get("id"),
              "name": call.get("function", {}).get("name"), "content": TOOL_RESULT}  # fmt: skip
    second = await probe.chat(
        _body([*ask(TOOL_PROMPT), assistant, result], 2048, tools=[LOOKUP_TOOL])
    )
    if not second.ok:
        return fails(f"the result was refused: {second.said()}")
    text = str(second.message.get("content") or "")
    return holds(f"answered {text[:60]!r} (finish_reason {second.finish_reason()})")


# A tool round as a stateless client that dropped the reasoning would send it back.
_ROUND_WITHOUT_REASONING: list[dict[str, Any]] = [
    *ask(TOOL_PROMPT),
    {"role": "assistant", "content": "", "tool_calls": [{
        "id": "functions.lookup_word:0", "type": "function",
        "function": {"name": "lookup_word", "arguments": json.dumps({"word": "apple"})},
    }]},
    {"role": "tool", "tool_call_id": "functions.lookup_word:0", "name": "lookup_word",
     "content": TOOL_RESULT},
]  # fmt: skip


@check("kimi.tool_round_needs_reasoning", vendor="kimi", models=KIMI_MODELS,
       rule="while thinking, a history whose assistant tool-call message lacks "
            "reasoning_content is refused (400 'thinking is enabled but reasoning_content "
            "is missing in assistant tool call message at index N')",
       source="VENDORS.md row 26; kimi.com/code/docs error reference")  # fmt: skip
async def tool_round_needs_reasoning(probe: Probe) -> Outcome:
    answer = await probe.chat(_body(_ROUND_WITHOUT_REASONING, 256, tools=[LOOKUP_TOOL]))
    if _refused(answer) and "reasoning_content" in answer.error_message():
        return holds(answer.said())
    if _refused(answer):
        return fails(f"refused, but not for the missing reasoning: {answer.said()}")
    return _refusal(answer, "the round without reasoning_content")


@check("kimi.stream_usage", vendor="kimi", models=KIMI_MODELS,
       rule="a streamed answer reports its usage in the last chunk, in choices[0].usage or "
            "at the top level (Moonshot's pages disagree on where; the detail says which)",
       source="VENDORS.md row 23; Moonshot's own client reads both")  # fmt: skip
async def stream_usage(probe: Probe) -> Outcome:
    answer = await probe.chat(_body(ask("Reply with the single word: ok"), 1024), stream=True)
    if not answer.ok:
        return fails(answer.said())
    chunks = answer.json_chunks()
    if not chunks:
        return fails("the stream carried no JSON chunk")
    last = chunks[-1]
    choices = last.get("choices") or [{}]
    if last.get("usage"):
        return holds(f"top level of the last chunk: {last['usage']}")
    if choices and choices[0].get("usage"):
        return holds(f"choices[0].usage of the last chunk: {choices[0]['usage']}")
    earlier = [i for i, c in enumerate(chunks) if c.get("usage")]
    where = f"only in chunk {earlier[-1]} of {len(chunks)}" if earlier else "in no chunk"
    return fails(f"usage {where}")


@check("kimi.web_search_with_thinking", vendor="kimi", models=(SWITCHABLE,),
       rule="$web_search with thinking on: Moonshot's page says thinking must be disabled; "
            "whether the API refuses it or answers is recorded",
       source="VENDORS.md row 10; platform.moonshot.cn/docs/guide/use-web-search")  # fmt: skip
async def web_search_with_thinking(probe: Probe) -> Outcome:
    search = {"type": "builtin_function", "function": {"name": "$web_search"}}
    answer = await probe.chat(
        _body(ask("Search the web: what is the capital of France?"), 1024, tools=[search])
    )
    if not answer.ok:
        return observed(f"refused: {answer.said()}")
    calls = [c.get("function", {}).get("name") for c in answer.message.get("tool_calls") or []]
    reasoning = "with" if answer.message.get("reasoning_content") else "without"
    if calls:
        return observed(f"accepted: called {', '.join(map(str, calls))} {reasoning} reasoning")
    return observed(f"accepted: answered without searching, {reasoning} reasoning "
                    f"(finish_reason {answer.finish_reason()})")  # fmt: skip


@check("kimi.tool_schema_needs_type", vendor="kimi", models=(SWITCHABLE,),
       rule="a tool parameter schema whose nested property has no `type` (enum only) is "
            "refused ('type is not defined')",
       source="VENDORS.md row 8; MoonshotAI/kimi-cli kosong kimi.py _convert_tool")  # fmt: skip
async def tool_schema_needs_type(probe: Probe) -> Outcome:
    enum_only = {"type": "function", "function": {
        "name": "set_unit", "description": "Set the temperature unit.",
        "parameters": {"type": "object", "properties": {"unit": {"enum": ["celsius", "kelvin"]}},
                       "required": ["unit"]},
    }}  # fmt: skip
    answer = await probe.chat(_body(ask("Reply with: ok"), 16, tools=[enum_only], **OFF))
    outcome = _refusal(answer, "the enum-only property")
    if outcome.status == "holds" and "type is not defined" not in answer.error_message():
        return holds(f"refused, in other words than 'type is not defined': {answer.said()}")
    return outcome


_COUNT = "Count from 1 to 100 in words, separated by commas."


@check("kimi.max_completion_tokens", vendor="kimi", models=(SWITCHABLE,),
       rule="max_completion_tokens: 5 bounds the reply (finish_reason 'length')",
       source=f"VENDORS.md row 1; {CHAT_REFERENCE} (max_tokens deprecated for it)")  # fmt: skip
async def max_completion_tokens(probe: Probe) -> Outcome:
    answer = await probe.chat(_body(ask(_COUNT), 5, **OFF))
    return _bounded(answer, holds, fails)


@check("kimi.max_tokens_deprecated", vendor="kimi", models=(SWITCHABLE,),
       rule="max_tokens, deprecated for max_completion_tokens: whether 5 still bounds the "
            "reply is recorded",
       source=f"VENDORS.md row 1 ('?' in its verdict); {CHAT_REFERENCE}")  # fmt: skip
async def max_tokens_deprecated(probe: Probe) -> Outcome:
    answer = await probe.chat({"messages": ask(_COUNT), "max_tokens": 5, **OFF})
    if not answer.ok:
        return observed(f"refused: {answer.said()}")
    return _bounded(answer, lambda d: observed(f"still bounds: {d}"),
                    lambda d: observed(f"no longer bounds: {d}"))  # fmt: skip


def _bounded(answer: Exchange, yes: Any, no: Any) -> Outcome:
    if not answer.ok:
        return no(answer.said())
    usage = answer.data.get("usage") or {}
    detail = f"finish_reason {answer.finish_reason()}, completion_tokens " \
             f"{usage.get('completion_tokens')}"  # fmt: skip
    cut = answer.finish_reason() == "length" and int(usage.get("completion_tokens") or 0) <= 5
    return yes(detail) if cut else no(detail)


@check("kimi.over_long_request", vendor="kimi", models=(SWITCHABLE,),
       rule="a request whose prompt plus output cap exceeds the context window is refused "
            "('Your request exceeded model token limit'), which exai reads as context_length. "
            "Checked cheaply: a one-line prompt with max_completion_tokens above the window, "
            "not a prompt larger than it",
       source=f"VENDORS.md row 28; {ERRORS_PAGE}")  # fmt: skip
async def over_long_request(probe: Probe) -> Outcome:
    answer = await probe.chat(_body(ask("Reply with: ok"), K26_WINDOW + 40_000, **OFF))
    if not _refused(answer):
        return fails(f"not refused: {answer.said() if not answer.ok else 'answered'}")
    # exai's error mapping, as its Kimi plugin applies it (Moonshot's own error types
    # say nothing of length: the message decides).
    error = status_error(provider="kimi", label="Kimi", status=answer.status, headers=None,
                         body=answer.body)  # fmt: skip
    kind = error.details.get("kind")
    if kind == "context_length":
        return holds(f"{answer.said()}; exai: context_length")
    return fails(f"{answer.said()}; exai reads it as {kind}, not context_length")


@check("kimi.retired_id", vendor="kimi", models=("kimi-k2-thinking",),
       rule="a retired model id is answered 404 resource_not_found_error",
       source="VENDORS.md section 0 (3p promptfoo.dev/docs/providers/moonshot; 3p kimi-api "
              "skill errors-and-limits.md)")  # fmt: skip
async def retired_id(probe: Probe) -> Outcome:
    return _not_found(await probe.chat(_body(ask("Reply with: ok"), 16)))


@check("kimi.retired_preview_id", vendor="kimi", models=("kimi-k2-0905-preview",),
       rule="a retired preview id is answered 404 resource_not_found_error",
       source="VENDORS.md section 0 (3p CN digest of platform.moonshot.cn/docs, 2026-09-03: "
              "kimi-k2-* 已下线)")  # fmt: skip
async def retired_preview_id(probe: Probe) -> Outcome:
    return _not_found(await probe.chat(_body(ask("Reply with: ok"), 16)))


def _not_found(answer: Exchange) -> Outcome:
    code = answer.data.get("error") or {}
    kind = code.get("type") if isinstance(code, dict) else None
    if answer.status == 404 and kind == "resource_not_found_error":
        return holds(answer.said())
    return fails(answer.said() if not answer.ok else "served")


@check("kimi.fixed_temperature", vendor="kimi", models=(SWITCHABLE,),
       rule="kimi-k2.6's temperature is fixed (1.0 thinking, 0.6 not): another value is "
            "refused",
       source="VENDORS.md row 5; platform.kimi.ai/docs/api/models-overview")  # fmt: skip
async def fixed_temperature(probe: Probe) -> Outcome:
    answer = await probe.chat(_body(ask("Reply with: ok"), 16, temperature=0.3))
    return _refusal(answer, "temperature 0.3 while thinking")
