"""OpenAI's legacy function calling (``functions``, ``function_call``) as tools.

Older clients offer ``functions`` and steer them with ``function_call``; the
model answers with one ``message.function_call`` and ``finish_reason:
"function_call"``, and the client returns the result as a ``role: "function"``
message naming the function. exai serves them as the tools they became: each
function is a function tool, the choice a ``tool_choice``, one call at a time
(``parallel_tool_calls: false``), and the history's function calls and results
become tool calls and tool messages with ids made from their place in the
conversation (``call_fn_<index of the assistant message>``), so a result is
tied to the call before it. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from exai.web.model_call import RequestRefused, want_dict, want_list

__all__ = ["LEGACY_FIELDS", "legacy_messages", "legacy_tools"]

LEGACY_FIELDS = ("functions", "function_call")


def legacy_tools(functions: Any, function_call: Any) -> tuple[list[dict[str, Any]], Any]:
    """``(tools, tool_choice)`` for ``functions`` and ``function_call``."""
    tools = [
        {"type": "function", "function": want_dict(f, f"functions[{i}]")}
        for i, f in enumerate(want_list(functions or [], "functions"))
    ]
    if function_call is None or function_call in ("auto", "none"):
        return tools, function_call
    name = want_dict(function_call, "function_call").get("name")
    if not isinstance(name, str) or set(function_call) != {"name"}:
        raise RequestRefused(
            'function_call is "auto", "none" or {"name": "<function>"}', param="function_call"
        )
    return tools, {"type": "function", "function": {"name": name}}


def legacy_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with legacy function calls and results as tool calls and tool messages.

    A message with neither is returned as it is.
    """
    out: list[dict[str, Any]] = []
    last_call: str | None = None
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant" and message.get("function_call") is not None:
            call = want_dict(message["function_call"], f"messages[{index}].function_call")
            if message.get("tool_calls"):
                raise RequestRefused(
                    "a message carries tool_calls or function_call, not both",
                    param=f"messages[{index}].function_call",
                )
            last_call = f"call_fn_{index}"
            rest = {k: v for k, v in message.items() if k != "function_call"}
            rest["tool_calls"] = [
                {
                    "id": last_call,
                    "type": "function",
                    "function": {"name": call.get("name"), "arguments": call.get("arguments", "")},
                }
            ]
            out.append(rest)
        elif role == "function":
            if last_call is None:
                raise RequestRefused(
                    "a function message answers the function_call of an assistant message "
                    "before it, and there is none",
                    param=f"messages[{index}]",
                )
            out.append(
                {"role": "tool", "tool_call_id": last_call, "content": message.get("content") or ""}
            )
        else:
            out.append(message)
    return out
